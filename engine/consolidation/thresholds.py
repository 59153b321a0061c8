"""Similarity thresholds of consolidation, measured on all-MiniLM-L6-v2 (the default model).

Cosine of 15 pairs stating one belief in other words ("struggles with async Python" /
"has trouble with async Python code", "is learning Spanish" / "is studying Spanish") against
18 pairs of different beliefs about the same subject or the same belief about another
subject ("plays tennis" / "plays chess on weekends", "prefers tea" / "prefers coffee",
"Alice" / "Bob plays tennis"); tests/consolidation/test_thresholds.py re-measures them:

    cosine alone   same belief kept together   different beliefs kept apart
    >= 0.85        15/15                       11/18
    >= 0.88        15/15                       15/18
    >= 0.90        15/15                       16/18
    >= 0.92        14/15                       16/18

The same beliefs score 0.920-0.980. Of the different ones, "loves hiking in the Alps" /
"went hiking in the Alps" scores 0.899: a fact that is evidence for the belief, so it may
join it, but two observations saying these stay apart. Two score above 0.94 and only the text
guards of relations.py separate them: a negation ("is / is not comfortable with") and a changed
number ("has two / three kids"). With claims and guards, every pair is classified right at
both thresholds below. So a fact joins an observation from JOIN_SIMILARITY (it must also
share an entity), and two observations of one scope merge from MERGE_SIMILARITY; when a guard
sees a contradiction the newer one absorbs the older instead.
"""

from __future__ import annotations

JOIN_SIMILARITY = 0.88
MERGE_SIMILARITY = 0.90

# Observations compared with each new fact (nearest first), and older facts without an
# observation searched for a second supporting (or a contradicting) one.
RELATED_OBSERVATIONS = 20
PEER_FACTS = 50
# Below this similarity nothing is compared unless the claims match (claims catch
# contradictions far below it: 0.59 for the async story).
CANDIDATE_FLOOR = 0.3
