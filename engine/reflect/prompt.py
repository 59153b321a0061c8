"""The reflect agent's instructions: mission, directives and disposition as words.

Each disposition trait (1 low … 5 high) maps to its own instruction, so a level changes what
the model is told to do, not just a number it has to interpret: a skeptical bank (4–5) must
find corroboration before it states a claim, a literal one (4–5) must not infer past the
words stored, an empathetic one (4–5) acknowledges feelings. Level 3 is the neutral default.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.banks import Disposition

SKEPTICISM: dict[int, str] = {
    1: "Trust the memories readily: a single mention is enough to state something as fact.",
    2: "Give memories the benefit of the doubt; mention uncertainty only when memories disagree.",
    3: "Weigh the evidence: say how well supported a claim is when it rests on a single "
    "memory or memories disagree.",
    4: "Be skeptical: require corroboration from at least two independent memories before "
    "stating a claim as fact; present a claim backed by one memory as unconfirmed.",
    5: "Be highly skeptical: demand corroboration from independent memories for every claim, "
    "state nothing as fact that a single memory supports, and point out contradictions and "
    "stale evidence explicitly.",
}
LITERALISM: dict[int, str] = {
    1: "Read between the lines: infer intentions, preferences and likely outcomes freely "
    "from the memories.",
    2: "Draw reasonable inferences from the memories and say when you are inferring.",
    3: "Balance what was said with sensible inference, marking inferences as such.",
    4: "Stay close to the words: answer from what the memories state, and mark any inference "
    "as one.",
    5: "Be strictly literal: answer only with what the memories state, quote them where you "
    "can, and do not infer beyond their exact wording.",
}
EMPATHY: dict[int, str] = {
    1: "Be matter-of-fact: report the information without emotional framing.",
    2: "Be neutral and concise; mention feelings only when they bear on the question.",
    3: "Be considerate: acknowledge feelings in the memories where they matter.",
    4: "Be warm: acknowledge the people's feelings and circumstances the memories reveal.",
    5: "Be deeply empathetic: put the people's feelings and wellbeing first and phrase "
    "difficult facts with care.",
}

TOOL_GUIDE = (
    "Work from the most to the least distilled knowledge: search_mental_models for curated "
    "summaries, search_observations for consolidated beliefs, recall for raw facts, expand "
    "to read a fact's source chunk or document. Call done(answer, ids) when you can answer; "
    "ids are the ids of the memories and mental models the answer rests on. Answer only "
    "from what the tools return; if they return nothing relevant, say you do not know."
)


@dataclass(frozen=True)
class Directive:
    id: str
    name: str
    content: str


def disposition_lines(disposition: Disposition) -> list[str]:
    """The three traits' instructions, level by level."""
    return [
        SKEPTICISM[disposition.skepticism],
        LITERALISM[disposition.literalism],
        EMPATHY[disposition.empathy],
    ]


def system_prompt(
    mission: str,
    directives: list[Directive],
    disposition: Disposition,
    now: datetime,
    *,
    with_tools: bool = True,
) -> str:
    parts = [
        f"You answer questions from a long-term memory bank. Today is {now.date().isoformat()}.",
    ]
    if mission.strip():
        parts.append(f"The bank's mission: {mission.strip()}")
    parts.append(
        "How to reason:\n" + "\n".join(f"- {line}" for line in disposition_lines(disposition))
    )
    if directives:
        rules = "\n".join(f"- {d.content}" for d in directives)
        parts.append(f"Directives (always follow them, they override the above):\n{rules}")
    if with_tools:
        parts.append(TOOL_GUIDE)
    else:
        parts.append(
            "Write the final answer now from the evidence gathered so far, in markdown. Cite "
            "the ids you rely on in square brackets, e.g. [id]. If the evidence does not "
            "answer the question, say so."
        )
    return "\n\n".join(parts)


def user_prompt(query: str, context: str) -> str:
    if context.strip():
        return f"Question: {query}\n\nContext from the caller: {context.strip()}"
    return f"Question: {query}"
