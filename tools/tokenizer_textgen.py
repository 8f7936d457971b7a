"""Seeded generator of varied text for tokenizer fixtures and parity tests.

Mixes prose (from the Debian `fortunes` package when present) with the cases that break tokenizers:
accents (composed and decomposed), CJK, emoji with joiners and modifiers, code, whitespace runs of every
kind (tabs, CR LF, NBSP, ideographic space, U+0085, U+2028), numbers in several scripts, contractions in
any case, and special-token strings embedded in text. Used by make_tokenizer_fixtures.py (fixed seed) and
tokenizer_parity.py (fresh seed per run).
"""
import glob
import os
import random

FORTUNE_DIR = "/usr/share/games/fortunes"

WORDS = [
    "café", "naïve", "résumé", "Ångström", "façade", "jalapeño", "Müller", "straße", "ÉCOLE", "coöperate",
    "Zürich", "São Paulo", "Kraków", "Dvořák", "ﬁnance", "œuvre", "Æsir", "þorn", "İstanbul", "ǅemal",
    "日本語のテキスト", "中文字符", "漢字", "한국어 텍스트", "東京タワー", "ｶﾀｶﾅ", "ｆｕｌｌｗｉｄｔｈ",
    "Привет, мир", "Ελληνικά", "שלום", "مرحبا بالعالم", "नमस्ते", "ภาษาไทย", "Tiếng Việt", "ქართული",
    "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️", "🤖🚀", "✨", "🐍", "½", "™", "©", "°C", "€", "£", "¥", "→", "≠", "∑", "√2",
    "e\u0301", "a\u0308", "n\u0303o", "\u200bzero\u200bwidth", "soft\u00adhyphen", "x\u200dy",
]
CODE = [
    "def f(x):\n    return x**2  # square\n",
    "int main(void) { return 0; }\n",
    "if (a != b && c <= d) {\n\tprintf(\"%d\\n\", a);\n}\n",
    "for i in range(10):\n        print(i, end='')\n",
    "const x = {a: 1, 'b': [2, 3]};  // trailing\n",
    "SELECT * FROM users WHERE id >= 42;\n",
    "<html><body class=\"x\">Hi &amp; bye</body></html>\n",
    "$ ls -la /usr/bin | grep -E '^-rwx' > out.txt 2>&1\n",
    "x += 1; y -= 2; z *= 3; w /= 4; v %= 5;\n",
    "std::vector<int32_t> v{1, 2, 3};\n",
]
SPACES = ["   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", " \n ", "\r\n", "\r", "\u00a0", "\u3000", "\u2028",
          "\u0085", "\u2009", "  \t \n", "\f", "\v", "      "]
NUMBERS = ["12345678", "3.14159", "1,000,000", "2024-01-31", "0x7fff", "1e-9", "٣٤٥", "१२३", "²³", "Ⅻ",
           "42", "007", "99.9%", "-17", "+1 (555) 010-9999"]
CONTRACTIONS = ["I'm", "don't", "WE'LL", "She'D", "they've", "it's", "you're", "O'Neil", "'tis", "rock 'n' roll"]
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
            "<|endoftext|>", "<|eot_id", "<|", "|>", "<mask>", " <mask>", "[[tool]]  ", "        ", "          ",
            "ŋŋ", " ŋŋ ", "aŋŋb", "ŋŋ_x", "(ŋŋ)", "éŋŋ", "ŋŋ1", "ŋŋ\u0301", "ŋŋª"]


def fortune_texts():
    """Fortune cookies (one string each) from the Debian package, or [] if it is not installed."""
    out = []
    for path in sorted(glob.glob(os.path.join(FORTUNE_DIR, "*"))):
        if path.endswith(".dat") or path.endswith(".u8") or os.path.islink(path) or os.path.isdir(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            out.extend(t.strip("\n") for t in f.read().split("\n%\n") if t.strip())
    return out


def sentence(rng, prose):
    """One varied text: a fortune, words and odd pieces joined by varied separators."""
    parts = []
    if prose and rng.random() < 0.7:
        parts.append(rng.choice(prose))
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.30:
            parts.append(rng.choice(WORDS))
        elif r < 0.40:
            parts.append(rng.choice(CODE))
        elif r < 0.55:
            parts.append(rng.choice(NUMBERS))
        elif r < 0.68:
            parts.append(rng.choice(CONTRACTIONS))
        elif r < 0.73:
            parts.append(rng.choice(SPECIALS))
        elif r < 0.80:
            parts.append("".join(chr(rng.randint(0x20, 0x7e)) for _ in range(rng.randint(1, 20))))
        else:
            parts.append(rng.choice(SPACES))
    text = ""
    for p in parts:
        text += p + rng.choice([" ", " ", " ", "", "\n", "  ", "\t", ", ", ". "])
    if rng.random() < 0.3:
        text = rng.choice(SPACES) + text
    if rng.random() < 0.5:
        text = text.rstrip(" ")
    return text


def texts(seed, n):
    rng = random.Random(seed)
    prose = fortune_texts()
    return [sentence(rng, prose) for _ in range(n)]


def training_corpus(seed):
    """All fortunes plus generated varied text: the training set for the fixture tokenizers."""
    rng = random.Random(seed)
    prose = fortune_texts()
    # ŋ stays out of training so that the fixtures' single_word token "ŋŋ" is reachable only as an added token.
    return prose + [sentence(rng, prose).replace("ŋ", "") for _ in range(20000)]
