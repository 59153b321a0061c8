"""A Chinese conversation set for bench/zh_retrieval.py, written for Engram (not translated).

Two colleagues, 小林 (editor of an open-source column) and 陈默, over six sessions from March
to October 2026: rules for writing, a cat, trips, a marathon, preferences that change (美式 →
拿铁 → 绿茶), relative dates (上周, 三天前, 下个月, 去年春天), and questions that need two turns
or share no word with their evidence (宠物 vs 猫, 受伤 vs 膝盖疼). Categories follow LoCoMo:
1 multi-hop, 2 temporal, 3 open-domain (no shared keyword), 4 single-hop. Evidence ids are
"D<session>:<turn>", 1-based. Deterministic: the same objects on every run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from bench.locomo_data import Conversation, Question, Session, Turn

SAMPLE_ID: Final = "zh-editorial"

_SESSIONS: Final[tuple[tuple[datetime, tuple[tuple[str, str], ...]], ...]] = (
    (
        datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
        (
            ("小林", "陈默，我上周刚接手开源栏目，以后每周三发一篇稿子。"),
            ("陈默", "恭喜！开源栏目之前是老周在负责吧？"),
            ("小林", "对，老周去年底调去了视频组。"),
            ("小林", "我写稿前一定先在沙箱里把代码跑通，不然心里不踏实。"),
            ("陈默", "这个习惯好。我们团队主要用 Postgres，你的沙箱也装了吗？"),
            ("小林", "装了，还装了 Temporal 的开发服务器。"),
            ("陈默", "截图尺寸有规定吗？"),
            ("小林", "统一用 1440×900，主编特别在意这个。"),
            ("小林", "我家猫叫团子，昨天把我的键盘咬坏了。"),
            ("陈默", "哈哈，那你得换个机械键盘了。"),
        ),
    ),
    (
        datetime(2026, 4, 15, 19, 30, tzinfo=UTC),
        (
            ("陈默", "小林，你上次说不喜欢哪种稿子来着？"),
            ("小林", "我不喜欢只翻译 README 的稿子，读者需要真实的使用体验。"),
            ("小林", "三天前我去杭州参加了一个数据库沙龙。"),
            ("陈默", "在杭州哪里？"),
            ("小林", "在西湖边的一家咖啡馆，来了大概五十个人。"),
            ("小林", "我最近喜欢喝美式咖啡，不加糖。"),
            ("陈默", "我还是只喝茶，龙井最好。"),
            ("小林", "下个月我要去成都看望我妈妈。"),
            ("陈默", "成都的火锅一定要吃。"),
        ),
    ),
    (
        datetime(2026, 5, 20, 12, 0, tzinfo=UTC),
        (
            ("小林", "我这个月初去了成都，吃了三次火锅。"),
            ("陈默", "你妈妈身体还好吗？"),
            ("小林", "挺好的，她退休后在社区教书法。"),
            ("小林", "我现在改喝拿铁了，美式太苦。"),
            ("陈默", "上周我把博客从 WordPress 迁到了 Hugo。"),
            ("小林", "迁移花了多久？"),
            ("陈默", "花了两个周末，主要是图片链接要改。"),
            ("小林", "我的新稿子写的是 pgvector 的索引调优。"),
            ("陈默", "那个题目不错，读者应该会喜欢。"),
        ),
    ),
    (
        datetime(2026, 7, 8, 9, 0, tzinfo=UTC),
        (
            ("小林", "团子生病了，昨天带它去看了兽医。"),
            ("陈默", "严重吗？"),
            ("小林", "医生说是肠胃炎，吃几天药就好。"),
            ("陈默", "我打算下周去云南徒步，大概走五天。"),
            ("小林", "记得带防晒霜，高原紫外线很强。"),
            ("小林", "主编说从下个月开始，开源栏目改成每两周发一篇。"),
            ("陈默", "那你轻松一点了。"),
            ("小林", "其实更忙了，因为每篇要写得更深入。"),
        ),
    ),
    (
        datetime(2026, 9, 10, 20, 0, tzinfo=UTC),
        (
            ("陈默", "我七月从云南回来，晒黑了好多。"),
            ("小林", "照片发我看看！"),
            ("小林", "我报名了十月的马拉松，正在每天早上跑步。"),
            ("陈默", "全程还是半程？"),
            ("小林", "半程，二十一公里。"),
            ("陈默", "我去年春天跑过一次半程，膝盖疼了一个月。"),
            ("小林", "我现在不喝咖啡了，改喝绿茶，睡得更好。"),
            ("陈默", "欢迎加入喝茶的队伍。"),
        ),
    ),
    (
        datetime(2026, 10, 2, 15, 0, tzinfo=UTC),
        (
            ("小林", "上周那篇关于 Temporal 工作流的稿子被主编退回了。"),
            ("陈默", "为什么？"),
            ("小林", "主编说截图不是 1440×900，而且有一段只是翻译了官方文档。"),
            ("陈默", "那你下周重新写吗？"),
            ("小林", "对，下周三之前要交。"),
            ("小林", "团子已经完全好了，最近胖了一斤。"),
            ("陈默", "国庆假期你有什么安排？"),
            ("小林", "在家备战马拉松，哪里也不去。"),
        ),
    ),
)

_QUESTIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    # 4 single-hop
    (4, "小林负责哪个栏目？", ("D1:1",)),
    (4, "小林写稿前有什么习惯？", ("D1:4",)),
    (4, "截图应该用什么尺寸？", ("D1:8",)),
    (4, "团队主要用什么数据库？", ("D1:5",)),
    (4, "小林不喜欢什么样的稿子？", ("D2:2",)),
    (4, "小林的妈妈退休后在做什么？", ("D3:3",)),
    (4, "陈默把博客迁到了哪个平台？", ("D3:5",)),
    (4, "小林报名的马拉松是全程还是半程？", ("D5:3", "D5:5")),
    (4, "陈默喜欢喝什么茶？", ("D2:7",)),
    (4, "小林的新稿子写的是什么主题？", ("D3:8",)),
    (4, "稿子被退回的原因是什么？", ("D6:3",)),
    (4, "去云南徒步要注意什么？", ("D4:5",)),
    # 2 temporal
    (2, "小林什么时候接手开源栏目的？", ("D1:1",)),
    (2, "小林什么时候去杭州参加沙龙的？", ("D2:3",)),
    (2, "小林哪个月去了成都？", ("D3:1",)),
    (2, "团子是什么时候去看兽医的？", ("D4:1",)),
    (2, "陈默什么时候去云南徒步？", ("D4:4",)),
    (2, "九月底哪篇稿子被退回了？", ("D6:1",)),
    (2, "去年春天陈默做了什么？", ("D5:6",)),
    (2, "重写的稿子最晚什么时候交？", ("D6:5",)),
    # 1 multi-hop
    (1, "小林喝饮料的习惯是怎么变化的？", ("D2:6", "D3:4", "D5:7")),
    (1, "开源栏目之前的负责人现在在哪个组？", ("D1:2", "D1:3")),
    (1, "小林的猫后来怎么样了？", ("D1:9", "D4:1", "D6:6")),
    (1, "小林去看望妈妈时吃了什么？", ("D2:8", "D3:1")),
    (1, "开源栏目的发稿频率是怎么变的？", ("D1:1", "D4:6")),
    (1, "小林和陈默现在都喝茶吗？", ("D2:7", "D5:7")),
    # 3 open-domain: no word shared with the evidence
    (3, "小林养的宠物叫什么名字？", ("D1:9",)),
    (3, "小林为什么每天起那么早？", ("D5:3",)),
    (3, "陈默运动时受过什么伤？", ("D5:6",)),
    (3, "小林十一期间待在哪里？", ("D6:8",)),
    (3, "小林的家人做什么工作？", ("D3:3",)),
    (3, "哪次聚会有几十人参加？", ("D2:5",)),
    # Added in a second round (2026-12-02), written before measuring them: 6 temporal and
    # 5 multi-hop, so that the set is less easy to fit.
    (2, "陈默是什么时候把博客迁到 Hugo 的？", ("D3:5",)),
    (2, "团子把键盘咬坏是哪一天？", ("D1:9",)),
    (2, "开源栏目从哪个月开始改成两周一篇？", ("D4:6",)),
    (2, "陈默徒步是几月份回来的？", ("D5:1",)),
    (2, "今年五月陈默做了什么？", ("D3:5",)),
    (2, "国庆假期小林打算做什么？", ("D6:7", "D6:8")),
    (1, "小林去杭州参加的沙龙在什么地方举办？", ("D2:3", "D2:5")),
    (1, "陈默徒步的地方天气有什么特点？", ("D4:4", "D4:5")),
    (1, "陈默跑过的比赛和小林报名的是一样的距离吗？", ("D5:5", "D5:6")),
    (1, "小林被退回的稿子违反了哪些规定？", ("D6:3", "D1:8")),
    (1, "小林在成都吃火锅的时候，妈妈已经退休了吗？", ("D3:1", "D3:3")),
)


def conversation() -> Conversation:
    sessions = tuple(
        Session(
            number,
            when,
            when.strftime("%Y-%m-%d %H:%M"),
            tuple(
                Turn(
                    f"D{number}:{index}",
                    number,
                    speaker,
                    f"{speaker}：{text}",
                    when.strftime("%Y年%m月%d日"),
                    when,
                )
                for index, (speaker, text) in enumerate(turns, start=1)
            ),
        )
        for number, (when, turns) in enumerate(_SESSIONS, start=1)
    )
    questions = tuple(Question(q, category, frozenset(ids)) for category, q, ids in _QUESTIONS)
    return Conversation(1, SAMPLE_ID, sessions, questions)
