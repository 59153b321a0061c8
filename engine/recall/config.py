"""Recall's tuning knobs, in one frozen record; the defaults are the measured choices.

Every figure here is recall@10 over LoCoMo categories 1-4 on conversations 1-5 (the tuning
half: 760 questions), facts from the local extractor (one item per turn), the protocol of
`../shared/data/locomo/README.md`, each variant changed alone from the defaults of its time.
Conversations 6-10 were not used to choose anything.

What decides the ranking is the MaxSim reranker (engine/recall/rerank.py); the arms and
fusion decide what it gets to see.
    keyword arm alone 0.638 · semantic arm alone 0.620 · equal-weight RRF of both 0.645
    · + MaxSim over the fused top 80 0.681 · + graph and temporal arms 0.682
    · + MMR λ=0.6 0.708 · + temporal proximity 0.730 · + MaxSim in context 0.747
    · + every fact names its speaker (engine/extraction/local.py) 0.764
    · + questions someone asked scored down (question_penalty 0.2) 0.770
Measured and rejected:
- blending the fused score back into the final one (rerank_weight 0.9/0.8/0.6): 0.6938/
  0.6939/0.6933 against 0.6945; adding the BM25 score or the cosine to MaxSim: +0.0007 / −0.6;
  dropping stop-word query tokens from MaxSim: −0.7.
- recency (weight 0.05/0.1/0.2): −0.4/−0.6/−2.3. LoCoMo asks about the past, where newer is
  not better; the boost stays available, weighted 0.
- the graph as a score (its normalised score or rank added to the final score, 0.05…0.4):
  −0.3 … −5.3, the failure the issue reports of Hindsight's graph arm. The graph here only
  nominates candidates: its best 3 new finds are reranked (reserve 0/2/3/5/10: 0.7456/
  0.7453/0.7453/0.7446/0.7416), which is what finds a second hop no other arm reaches
  (tests/recall) at a cost of 0.03 on LoCoMo, whose local-extractor links add nothing.
  With speaker-attributed facts and the question penalty: graph reserve 6 0.7702 against
  0.7697 (more work for noise), graph weight 1.0 0.7631.
  Reserve 3 -> 6 (2026-12-01, int8 embeddings, context in the rerank): 0.804 -> 0.803,
  multi-hop 0.589 -> 0.591, adversarial 0.738 -> 0.759. Taken for what LoCoMo cannot show:
  in a bank whose facts share dates, temporal links reach off-topic facts of the same days,
  and with 3 they pushed the entity hop of tests/recall out of the shortlist in one run of
  several (its graph rank varies, 1st to 3rd, with the order facts were linked in).
Multi-hop (issue 17, 2026-12-01, conv 1-5, the 142 multi-hop questions alone, recall@10;
defaults 0.592; in-process over banks retained by session, docs/benchmarks.md "Multi-hop
misses"): graph reserve 12/20 0.587/0.581; budget low/high 0.586/0.590; MMR λ 0.5/0.7
0.560/0.594; episodes in MMR (two facts told within `context_gap` of each other count as at
least 0.5/0.8 alike, so a gathering question's top 10 spreads over conversations)
0.591/0.573; pseudo-relevance feedback (final + w · cos to the centroid of the top d, w/d
0.15/3, 0.3/3, 0.3/5) 0.588/0.588/0.570. None kept: of the 191 evidence turns missed, 98 are
reranked and outranked by facts as much on topic (often answers LoCoMo did not list), 35
reached by an arm but not reranked (more graph finds reranked lost more than they won),
58 reached by no arm.
Fitted weights (issue 17, 2026-12-02; docs/benchmarks.md "Fitted final score"): the final
score's weights were fitted together on conversations 1-5 (all categories, graded by the
evidence turns; re-ranking the recorded candidates offline, bench/locomo_rank_fit.py) and
checked on 6-10 held out. Old (context 0.4, window 0.5, question 0.2, λ 0.6) → new (context
0.5, window 0.417, question 0.25, temporal rank 0.25, query words 0.083, λ 0.633), recall@10
overall 1-4 / multi-hop / adversarial: conv 1-5 0.794/0.586/0.734 → 0.802/0.607/0.753;
held out 6-10 0.793/0.547/0.749 → 0.805/0.559/0.761. A pairwise logistic model over 16
features (MaxSim alone and in context, cosine, each arm's rank, BM25, entity overlap,
length, observation) gave held out 0.804/0.542-0.561/0.80-0.82 (λ 0.6-0.8): no better on
multi-hop, more weights; not taken. Same-turn facts counted as alike in MMR: −0.01 held out.
Refitted (2026-12-02, later; docs/benchmarks.md "Where the multi-hop drop is"): the same
climb over candidates recorded on banks of today's storage (half-width int4 token vectors,
local observations) and today's main: context 0.5 → 0.7, question 0.25 → 0.35, temporal
rank 0.25 → 0.35, λ 0.633 → 0.699 (window and query words unchanged). In process, the same
banks, with MMR over the order shown: conv 1-5 0.792/0.567/0.753 → 0.806/0.576/0.778; held
out 6-10 0.794/0.551/0.770 → 0.799/0.556/0.813 (open-domain 6-10 0.552 → 0.531, 46
questions); all 10 temporal 0.870 → 0.877.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from engine.errors import ConfigurationError
from engine.recall.types import ArmName, Budget


@dataclass(frozen=True)
class BudgetProfile:
    """How much work one recall may do: candidates per arm, HNSW breadth, rerank depth."""

    arm_limit: int  # candidates each arm returns
    ef_search: int  # hnsw.ef_search for the semantic and temporal scans
    rerank_depth: int  # fused candidates read from the database and reranked
    graph_seeds: int  # best candidates of the other arms the graph expands from
    graph_fanout: int  # neighbours fetched per seed and per shared entity
    graph_hops: int  # expansions past the query's named entities (engine/recall/graph.py)
    graph_frontier: int  # facts a hop expands from after the first
    graph_seed_hops: int  # expansions past the other arms' seeds


BUDGETS: Mapping[Budget, BudgetProfile] = MappingProxyType(
    {
        "low": BudgetProfile(
            arm_limit=30,
            ef_search=40,
            rerank_depth=40,
            graph_seeds=4,
            graph_fanout=8,
            graph_hops=1,
            graph_frontier=6,
            graph_seed_hops=1,
        ),
        "mid": BudgetProfile(
            arm_limit=60,
            ef_search=80,
            rerank_depth=80,
            graph_seeds=6,
            graph_fanout=12,
            graph_hops=2,
            graph_frontier=8,
            graph_seed_hops=1,
        ),
        "high": BudgetProfile(
            arm_limit=120,
            ef_search=160,
            rerank_depth=120,
            graph_seeds=10,
            graph_fanout=20,
            graph_hops=3,
            graph_frontier=12,
            graph_seed_hops=3,
        ),
    }
)
# Rerank depth (arm limit): 40 (30) 0.738 · 60 (60) 0.742 · 80 (60) 0.745 · 120 (120) 0.747 ·
# 160 (120) 0.739: past ~120 candidates MaxSim meets more near-misses than answers.
# Seed hops at mid 2 -> 1 (docs/benchmarks.md "Eighth pass"; conv 1-5 through the API, same
# banks, main and branch side by side): overall 0.792 -> 0.793, multi-hop 0.582 both (one
# question up, none down); PostgreSQL CPU of the 100k bench -11%, one hop statement fewer.


def _weights() -> Mapping[ArmName, float]:
    return MappingProxyType({"semantic": 1.0, "keyword": 1.0, "graph": 0.5, "temporal": 1.0})


def _caps() -> Mapping[ArmName, int]:
    return MappingProxyType({"semantic": 1000, "keyword": 1000, "graph": 1000, "temporal": 1000})


def _reserve() -> Mapping[ArmName, int]:
    return MappingProxyType({"semantic": 0, "keyword": 0, "graph": 6, "temporal": 5})


@dataclass(frozen=True)
class RecallConfig:
    # Weighted reciprocal-rank fusion: fused(d) = Σ_arm w_arm / (rrf_k + rank_arm(d)) over the
    # arm's first cap_arm ranks.
    rrf_k: int = 60
    weights: Mapping[ArmName, float] = field(default_factory=_weights)
    caps: Mapping[ArmName, int] = field(default_factory=_caps)
    # Each arm's first `reserve` hits are reranked even when fusion ranks them lower.
    reserve: Mapping[ArmName, int] = field(default_factory=_reserve)
    # Semantic hits below this cosine similarity are noise for MiniLM.
    similarity_floor: float = 0.1
    # final = rerank_weight * reranker + (1 - rerank_weight) * fused, both min-max normalised
    # over the reranked candidates.
    rerank_weight: float = 1.0
    # MaxSim's share of the fact-in-context score, and how many neighbours make the context
    # (engine/recall/rerank.py).
    # Re-measured with speaker-attributed facts and the question penalty, ρ 0.2/0.3/0.4:
    # 0.7731/0.7697/0.7721 (multi-hop 0.560/0.562/0.569): no trend, so 0.3 stays.
    # Context across turns: each retained item (a chat turn) is its own chunk, so neighbours
    # from the same chunk never join a question to the next turn's answer ("How long have you
    # been married?" / "5 years already!"). Neighbours now come from up to `context_chunks`
    # chunks on either side in the document, nearest chunk first. Measured on conv 1-5
    # (chunks, neighbours, ρ → overall 1-4 / multi-hop), from 0, 4, 0.3 → 0.770 / 0.563:
    #   1, 4, 0.3 → 0.777 / 0.550 · 1, 8, 0.3 → 0.782 / 0.560 · 2, 6, 0.3 → 0.782 / 0.558
    #   2, 8, 0.3 → 0.789 / 0.574 · 2, 12, 0.3 → 0.797 / 0.577 · 2, 16, 0.3 → 0.802 / 0.581
    #   3, 12, 0.3 → 0.799 / 0.576 · 3, 20, 0.3 → 0.802 / 0.588
    #   2, 8, 0.4 → 0.800 / 0.590 · 2, 12, 0.4 → 0.805 / 0.589 · 2, 12, 0.5 → 0.809 / 0.585
    # Chosen: 2, 8, 0.4 — twelve or more neighbours gain under 0.01 for half as many token
    # vectors again read and multiplied per recall (bench/recall_latency.py).
    # 0.5 since the fitted weights (the module's docstring), with the boosts below; 0.7 since
    # the refit on today's storage.
    context_weight: float = 0.7
    context_neighbours: int = 8
    context_chunks: int = 2
    # The chunks are counted on the conversation's timeline, across documents
    # (engine/recall/context.py): a conversation sent one document per message gets the
    # context it gets as one document. Other documents join within this gap of a fact's time
    # (a pause longer than this starts a new context), at most `context_scan` facts of them
    # read on either side per candidate.
    context_gap: timedelta = timedelta(hours=1)
    context_scan: int = 256
    # Boosts added to the normalised base score, each term in [0, 1].
    recency_weight: float = 0.0
    recency_half_life_days: float = 180.0
    temporal_weight: float = 0.417
    proof_weight: float = 0.0
    observation_boost: float = 0.2  # with prefer_observations
    # Subtracted from a fact that is a question ("Joanna: Seen any good movies lately?"):
    # it shares the words of a question about its topic and answers nothing, and MaxSim put
    # it first (11% of LoCoMo's facts, the only fact of 6 of 1,106 evidence turns).
    # 0/0.1/0.2/0.35: 0.7641/0.7687/0.7697/0.7690 (multi-hop 0.538/0.562/0.562/0.559).
    # 0.25 since the fitted weights, 0.35 since the refit (the module's docstring).
    question_penalty: float = 0.35
    # A query asking for a time (engine/dates/questions.py) raises each fact that carries an
    # occurred date by this share of its relevance: the answer to "什么时候交？" is dated.
    # Only 0.3 was tried: Chinese set temporal recall@10 0.875 -> 1.000 (with the "？" question
    # penalty), no other category lower; English queries never ask in these words.
    dated_answer_weight: float = 0.3
    # The temporal arm's rank and the query's words in the fact (engine/recall/scoring.py).
    temporal_rank_weight: float = 0.35
    term_overlap_weight: float = 0.083
    # MMR: λ·relevance − (1 − λ)·max similarity to what is already chosen; 1 = no diversity.
    # 0.633 since the fitted weights, 0.699 since the refit (the module's docstring;
    # ENGRAM_RECALL_MMR_LAMBDA too).
    # λ 1.0/0.9/0.8/0.7/0.6/0.5: 0.682/0.693/0.695/0.703/0.708/0.691 (before context;
    # with it, 0.5/0.6/0.7: 0.729/0.745/0.739; with speaker-attributed facts, 0.5/0.6/0.7:
    # 0.751/0.764/0.752, and with the question penalty 0.6/0.65: 0.770/0.766).
    mmr_lambda: float = 0.699
    # Graph: how much each stored link type counts, and entities above this many mentions are
    # not expanded (their weight 1/ln(e + n) is negligible and their fan-out is not).
    link_type_weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(
            {
                "semantic": 1.0,
                "entity": 1.0,
                "temporal": 0.5,
                "causal": 1.0,
                "entity_shared": 1.0,
                "entity_named": 1.0,
                "term_shared": 0.5,
            }
        )
    )
    max_entity_mentions: int = 5000
    # Bounded work in big banks (engine/recall/graph.py): shared entities expanded per query,
    # and mentions read per entity before the `fanout` most similar are kept. At 14.5k
    # synthetic facts the unbounded expansion read 8,454 facts per query (110-160 ms); 8 x 96
    # reads at most 768 (4-16 ms). LoCoMo conv 1-5 with the bounds (and the screened BM25 of
    # engine/recall/keyword.py): recall@10 0.745, the figure of these defaults before them;
    # with the exact short-window search of engine/recall/temporal.py as well, 0.747.
    graph_max_entities: int = 8
    graph_entity_scan: int = 96
    graph_similarity_weight: float = 0.5
    # The multi-hop walk (hops and frontier per budget above, these below) was set by reason,
    # not tuned: one LoCoMo run of all 10 (docs/benchmarks.md, "Multi-hop walk") gave 0.796
    # overall 1-4, multi-hop 0.566, against 0.795 / 0.561 before it, on the same banks.
    # Entities the query names seed the graph beside the other arms' facts, weighted as a
    # first-ranked seed (1 / (1 + 1)) times their specificity; at most `graph_max_entities`.
    graph_named_weight: float = 0.5
    # Rare index terms shared with a frontier fact: at most `graph_max_terms` per hop, terms
    # on more than `graph_max_term_df` facts never, `graph_term_scan` postings read per term.
    # A hop reads `scan × specificity` (at least the fanout) of a shared entity's or term's
    # facts: a popular one spreads little strength (docs/benchmarks.md "Sixth pass").
    graph_max_terms: int = 8
    graph_max_term_df: int = 500
    graph_term_scan: int = 64
    # Edges a walk goes on along; a fact reached only by the others is scored, not expanded.
    graph_walk_kinds: frozenset[str] = frozenset(
        {"semantic", "entity", "causal", "entity_shared", "entity_named", "term_shared"}
    )
    # Temporal arm: in-window hits whose temporal-link neighbours are added, and their decay.
    # (102 of the 760 questions name a time; proximity weight 0/0.2/0.3/0.5/0.7/1.0:
    # 0.695/0.715/0.723/0.730/0.729/0.729; the arm itself, beside the boost: +0.5.)
    # Re-measured with speaker-attributed facts and the question penalty: proximity weight
    # 0.5/0.7 0.7707/0.7729, keyword arm weight 1.3 0.7711: noise, so unchanged.
    temporal_spread_seeds: int = 5
    temporal_spread_decay: float = 0.5

    def __post_init__(self) -> None:
        for name in ("mmr_lambda", "rerank_weight", "context_weight"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"recall {name} must be between 0 and 1, got {value}")

    def budget(self, name: Budget) -> BudgetProfile:
        return BUDGETS[name]
