"""Questions that ask for a time ("什么时候交？", "哪个月去的？"): their answer is a fact that
carries a date, whatever words it shares with the question.

Only Chinese cues are listed. A Chinese reply often names its time and nothing else the
question names ("重写的稿子最晚什么时候交？" is answered by "对，下周三之前要交"), so the date
is the signal left. English "when" questions are left out: on LoCoMo their answers already
share the question's words (temporal recall@10 0.984), see docs/benchmarks.md.
"""

from __future__ import annotations

import re
from typing import Final

# 什么时候 / 何时 / 几时: when; 哪天 / 几号 / 星期几: which day; 哪个月 / 几月: which month;
# 哪年 / 哪一年: which year; 最晚 / 最迟 / 截止: by when at the latest (a deadline).
_ASKS_TIME: Final = re.compile(
    r"什么时候|什么时间|啥时候|何时|几时|哪[一]?天|哪日|几号|几月几[日号]|"
    r"(?:星期|礼拜|周)几|哪[一]?个?月|几月份?|哪[一]?年|几几年|最晚|最迟|截止"
)


def asks_time(query: str) -> bool:
    """Whether the query asks when something happens or is due."""
    return _ASKS_TIME.search(query) is not None
