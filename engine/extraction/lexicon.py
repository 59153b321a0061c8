"""The local extractor's word lists and patterns (engine/extraction/local.py, local_entities.py)."""

from __future__ import annotations

import re


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def phrases(text: str) -> frozenset[str]:
    return frozenset(p.strip() for p in text.split(",")) - {""}


# fmt: off
STOP = words("""
a an the and or but so if then than that that's this these those there there's here it it's
its is isn't are aren't was wasn't were be been being am do does did didn't don't doesn't
done have has had having haven't i i'm i've i'll i'd me my mine you you're you've you'll
you'd your yours he she him her his they them their we us our what what's who whom whose
which when where why how how's to of in on at for with from by about as into like just
really very too also not no yes yeah yep nope all any anything something everything nothing
some much many more most can can't could will won't would shall should may might must gonna
wanna gotta up out over again still even ever now well oh ah aw aww hmm um uh let's let during
after before since until without within through across around near behind between among against
toward towards upon via per besides
""")
FILLER = words("""
hi hey hello hiya howdy thanks thank thx ty welcome bye goodbye cya lol lmao haha hahaha omg
wow whoa yay cool great nice awesome amazing wonderful fantastic good glad happy sure ok okay
alright right totally absolutely exactly definitely agreed agree same true congrats
congratulations cheers sounds sound see hear talk chat soon later doing going been new news
catch care take luck best cute beautiful lovely incredible stunning interesting fun super
sweet pretty such guess think know mean means lot hope proud inspiring cheering rooting woohoo woo
awww awwww safe stay how're shining yay
back things stuff way keep it's bet
""")
ADVERBS = words("""
really just also always never often usually still totally actually absolutely definitely only
even sometimes truly recently finally already kinda mostly honestly generally rarely seriously
literally especially certainly probably personally genuinely sincerely deeply hardly barely
simply then too both all once first now currently ultimately eventually def sorta
""")
UNCHANGED_VERBS = words("""
can could will would shall should may might must ought had was did got used gotta wanna gonna
went made saw took came gave found felt thought said told knew left met ran won bought brought
began wrote read put cut set hit let quit spent sent built lost kept slept heard held taught
caught fought sold stood understood became drove flew grew threw wore ate fell forgot chose
spoke woke sang swam drank rode hid led fed paid laid meant dealt dreamt learnt burnt stuck
struck shot sat shook broke bit blew drew tore hung lent lit sank shut spun split spread swore
swept swung stole stung dug fled forgave froze rose shone slid strove wept wound overcame
cannot and or but to a an the in on at of for with so as if too not
""")
LABELS = words("""
note update edit ps re subject title summary question answer q a warning tip example step date
time important fyi reminder todo source link location address status http https pros cons
tips caution result results goal goals plan plans idea ideas problem solution reason context
background details description overview conclusion ingredients instructions steps notes
""")
TIME_WORDS = words("""
january february march april may june july august september october november december jan feb
mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday
sunday today yesterday tomorrow tonight spring summer autumn fall winter
""")
COMMON_CAPS = words("""
mom dad mum mommy daddy grandma grandpa granny god lol omg ok okay btw tbh imo fyi asap
tv diy ps hey hi hello wow yay thanks yes yeah no oh aw aww haha hmm
""")
ORG_SUFFIX = words("""
inc inc. corp corp. corporation llc ltd ltd. co co. company university college school academy
institute bank club group foundation association society agency department council committee
network press party union federation league lab labs studios records charity organization
organisation ministry church
""")
PLACE_SUFFIX = words("""
park street st avenue ave road rd boulevard beach lake river mountain mountains mount mt island
islands bay valley square station airport bridge stadium arena canyon falls forest garden
gardens zoo cafe café restaurant hotel city town county state village trail museum library
center centre hall market mall coast desert national
""")
EVENT_SUFFIX = words("""
festival conference con parade marathon race concert tournament championship summit fair expo
olympics cup games week day eve gala
""")
PLACES = phrases("""
afghanistan,argentina,australia,austria,bangladesh,belgium,brazil,bulgaria,cambodia,canada,
chile,china,colombia,croatia,cuba,czechia,denmark,egypt,england,ethiopia,finland,france,
germany,ghana,greece,hungary,iceland,india,indonesia,iran,iraq,ireland,israel,italy,jamaica,
japan,jordan,kenya,korea,lebanon,malaysia,mexico,morocco,nepal,netherlands,new zealand,
nigeria,norway,pakistan,peru,philippines,poland,portugal,romania,russia,scotland,serbia,
singapore,south africa,south korea,spain,sri lanka,sweden,switzerland,taiwan,tanzania,
thailand,turkey,uganda,ukraine,united kingdom,uk,united states,usa,us,america,vietnam,wales,
europe,asia,africa,antarctica,
new york,new york city,nyc,los angeles,la,san francisco,chicago,boston,seattle,portland,
miami,austin,dallas,houston,denver,atlanta,philadelphia,washington,las vegas,nashville,
san diego,phoenix,detroit,orlando,new orleans,honolulu,hawaii,alaska,california,texas,florida,
oregon,colorado,arizona,utah,nevada,montana,michigan,ohio,georgia,virginia,vermont,maine,
toronto,vancouver,montreal,banff,ottawa,london,paris,berlin,madrid,barcelona,rome,milan,
venice,florence,amsterdam,brussels,vienna,prague,budapest,warsaw,lisbon,dublin,edinburgh,
stockholm,oslo,copenhagen,helsinki,athens,istanbul,moscow,cairo,dubai,mumbai,delhi,
bangalore,beijing,shanghai,hong kong,tokyo,kyoto,osaka,seoul,bangkok,bali,sydney,melbourne,
auckland,rio de janeiro,buenos aires,mexico city,lima,cape town,nairobi,
""")
EVENTS = words("""
christmas easter halloween thanksgiving hanukkah diwali ramadan eid passover pride
""")
ORGS = phrases("""
nike,adidas,puma,under armour,gatorade,apple,google,microsoft,amazon,facebook,meta,starbucks,
walmart,target,ikea,disney,marvel,pixar,nba,nfl,mlb,nhl,fifa,uefa,nasa,unicef,unesco,
red cross,ymca,un,who,bbc,cnn,harvard,stanford,mit,oxford,cambridge,
""")
CONTEXT_WORDS = words("conversation chat session between user assistant meeting notes")
HONORIFICS = words("dr mr mrs ms prof")
NAME_LEADS = words("new san los las el saint north south east west great united")
CONNECTORS = frozenset({"of", "the", "de", "la", "del", "von", "van", "da", "du", "&"})
PRODUCTS = words("""
iphone ipad macbook airpods playstation ps4 ps5 xbox nintendo switch kindle fitbit tesla
prius android pixel galaxy gopro canon nikon spotify netflix instagram tiktok youtube
""")
PRODUCT_WORD = re.compile(
    r"\b(?:iphone|ipad|macbook|airpods|playstation|ps[45]|xbox|kindle|fitbit|gopro)\b", re.I
)
PLACE_NOUNS = (
    "beach|park|museum|gym|library|school|office|church|hospital|lake|mountains?|cafe|café|"
    "restaurant|bar|store|shop|mall|studio|concert|festival|zoo|camp|campsite|forest|river|farm|"
    "garden|shelter|center|centre|theater|theatre|stadium|pool|market|airport|hotel|beach house"
)
# fmt: on

APOS = str.maketrans({"’": "'", "‘": "'"})
SPEAKER = re.compile(r"[ \t]*(?P<name>[A-Z][\w'’.-]*(?:[ \t]+[A-Z][\w'’.-]*){0,2})[ \t]*:[ \t]+")
SHARE = re.compile(r"\[\s*(?:shares?|shared|sharing)\s+(?P<what>[^\]\n]+?)\s*\]", re.IGNORECASE)
TERMINATOR = re.compile(r"(?:\.{3}|…|[.!?])+[\"'”’)\]]*(?=\s|$)")
ABBREVIATIONS = words(
    "dr mr mrs ms prof st jr sr vs etc e.g i.e a.m p.m u.s inc co ltd no mt approx dept fig "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
TOKEN = re.compile(r"[A-Za-z][A-Za-z'’]*")
FIRST_PERSON = re.compile(
    r"(?<![\w'’-])(?:(?P<i>[Ii])(?P<adv>(?:\s+(?:" + "|".join(sorted(ADVERBS)) + r"))*)"
    r"(?:\s+(?P<verb>[A-Za-z]+(?:n['’]t)?))?"
    r"|(?P<ic>[Ii]['’](?:m|ve|ll|d))(?P<after>\s+[A-Za-z]+)?"
    r"|(?P<pron>(?i:me|my|mine|myself|we['’](?:re|ve|ll|d)|we|us|our|ours|ourselves)))(?![\w'’-])"
)
IS_FIRST_PERSON = re.compile(
    r"(?<![\w'’-])(?:[Ii](?:['’](?:m|ve|ll|d))?|(?i:me|my|mine|myself|we(?:['’](?:re|ve|ll|d))?|"
    r"us|our|ours))(?![\w'’-])"
)
CONSEQUENCE = re.compile(
    r"^(?:so,|so\s+(?:i|we|he|she|they|it|my|our)\b|therefore\b|thus\b|hence\b|that['’]s\s+why\b|"
    r"that\s+is\s+why\b|as\s+a\s+result\b|because\s+of\s+(?:that|this)\b|consequently\b)",
    re.IGNORECASE,
)
WHY = re.compile(
    r"(?:\bbecause(?!\s+of\s+(?:that|this)\b)|['’]cause\b|\bcuz\b|\bso\s+that|\bsince\s+(?=(?:i|we|"
    r"you|he|she|they|it|there|this|that|the|my|our|his|her|their)\b))\s*(?P<why>[^.!?;]+)",
    re.IGNORECASE,
)
QUOTED = re.compile(
    r"[\"“”](?P<q>[A-Z0-9][^\"“”\n]{1,80}?)[\"“”]|(?<![\w'’])['‘](?P<s>[A-Z][^'‘’\n]{1,80}?)['’](?!\w)"
)
# A capitalised run, optionally ending in a number that belongs to the name ("Room 101",
# "Apollo 11", "Terminal 3"), so names that differ only in their number stay apart.
CAPITALISED = re.compile(
    r"(?<![\w'’])[A-Z][\w'’&.-]*(?:\s+(?:(?:of(?:\s+the)?|de|la|del|von|van|da|du|&)\s+)?"
    r"[A-Z][\w'’&.-]*)*(?:\s+\d{1,6}[A-Za-z]?\b(?![.,:/]\d)"
    r"(?!\s+(?:times?|days?|weeks?|months?|years?|hours?|minutes?|people|kids|am|pm|of)\b))?"
)
MID_CAPITAL = re.compile(r"(?<=[a-z,;]\s)[A-Z][a-z]+")
PERSON_CUE = re.compile(
    r"(?:\bwith|\bmy\s+(?:\w+\s+)?(?:friend|sister|brother|mom|mother|dad|father|son|daughter|"
    r"wife|husband|partner|boyfriend|girlfriend|cousin|aunt|uncle|colleague|coworker|boss|"
    r"neighbou?r|mentor|teacher|niece|nephew|buddy)|\b(?:met|told|asked|called|texted|named|by)"
    r"|['’]s\s+(?:friend|sister|brother|mom|dad|wife|husband|partner|son|daughter))\s+$",
    re.IGNORECASE,
)
TITLE_CUE = re.compile(
    r"\b(?:book|novel|movie|film|song|album|show|series|game|play|podcast|called|titled|"
    r"reading|read|watched|watching|playing|listening\s+to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
PLACE_CUE = re.compile(
    r"(?:\b(?:in|at|near|visited|visiting|visit|around|across|through|toward|towards)|"
    r"\b(?:go|goes|going|went|gone|moved?|moving|trip|travel\w*|flew|fly|flying|drove|drive|"
    r"driving|head(?:ed|ing)?|back|came|come|coming|return\w*|vacation|holiday|relocat\w*)"
    r"\s+(?:\w+\s+)?to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
PLACE_PHRASE = re.compile(
    r"\b(?:at|in|to|from)\s+(?P<place>(?:the|a|an)\s+(?:[a-z]+\s+)?(?:" + PLACE_NOUNS + r"))\b"
)
DANGLING = re.compile(r"\b(?:on|in|at|during|since|by|from|for|of)\s*$", re.IGNORECASE)
DISCOURSE = re.compile(
    r"^(?:(?:so|well|oh|also|anyway|and|but|yeah|yes|hey|wow|btw|by the way),?\s+)+", re.I
)
