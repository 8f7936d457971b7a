"""Makes the committed tokenizer fixtures with the Hugging Face `tokenizers` library (no downloads).

Writes tests/fixtures/tokenizers/:
  llama3/tokenizer.json  Llama-3-style byte-level BPE: Split(llama3 regex, Isolated) + ByteLevel(no regex),
                         ignore_merges, TemplateProcessing with <|begin_of_text|>, 5 special tokens
  neox/tokenizer.json    GPT-NeoX/Mamba-style byte-level BPE: ByteLevel(GPT-2 regex), <|endoftext|>, added
                         tokens with normalized / lstrip / rstrip / single_word, merges in the "a b" string format
  corpus.txt             ~50 KB of varied test text (not the training text)
  expected_{llama3,neox}.jsonl   one JSON object per line:
      {"text": ..., "ids": [...], "ids_special": [...]}              encode without / with specials
      {"decode": [...], "text": ..., "text_skip": ...}               decode keeping / skipping specials
Usage: python3 tools/make_tokenizer_fixtures.py [out_dir]
"""
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_textgen  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]
VOCAB_SIZE = 2000


def make_llama3(corpus):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=LLAMA3_SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                                      special_tokens=[(bos, tok.token_to_id(bos))]),
    ])
    return tok


def make_neox(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    # Added tokens with the options real files use: GPT-NeoX's whitespace runs (normalized, not special),
    # a mask that swallows the spaces before it (lstrip), a tool marker that swallows those after (rstrip),
    # a word that only matches standing alone (single_word: not inside "aŋŋb"; ŋ is kept out of the training text).
    tok.add_tokens([AddedToken("        ", normalized=True, special=False),
                    AddedToken("[[tool]]", normalized=False, special=False, rstrip=True),
                    AddedToken("ŋŋ", normalized=False, special=False, single_word=True)])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    return tok


def save(tok, path, string_merges):
    tok.save(path)
    if string_merges:  # the older "left right" merges format (GPT-NeoX's file has it); both load alike
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False, indent=1)
        assert Tokenizer.from_file(path).encode("check it").ids == tok.encode("check it").ids


def test_texts(seed, target_bytes):
    out, size, rng = [], 0, random.Random(seed)
    for t in tokenizer_textgen.texts(seed, 100000):
        if size >= target_bytes:
            break
        out.append(t)
        size += len(t.encode("utf-8"))
    out += ["", " ", "\n", "a", "  leading", "trailing  ", "\t\r\n", "<|eot_id|>", "<|endoftext|>x",
            "hello<|eot_id|>world", "".join(chr(rng.randint(0x20, 0x7e)) for _ in range(300))]
    return out


def expected_lines(tok, texts, seed):
    lines = []
    for t in texts:
        lines.append({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids,
                      "ids_special": tok.encode(t, add_special_tokens=True).ids})
    # Decoding arbitrary id sequences: partial UTF-8 sequences must decode lossily, specials kept or skipped.
    rng = random.Random(seed)
    n = tok.get_vocab_size()
    for _ in range(60):
        ids = [rng.randrange(n) for _ in range(rng.randint(1, 12))]
        lines.append({"decode": ids, "text": tok.decode(ids, skip_special_tokens=False),
                      "text_skip": tok.decode(ids, skip_special_tokens=True)})
    return lines


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests",
                                                             "fixtures", "tokenizers")
    corpus = tokenizer_textgen.training_corpus(seed=1234)
    texts = test_texts(seed=99, target_bytes=50000)
    with open(os.path.join(out, "corpus.txt"), "w", encoding="utf-8", newline="") as f:
        f.write("".join(t + "\n" for t in texts[:-11]))
    for name, make in (("llama3", make_llama3), ("neox", make_neox)):
        tok = make(corpus)
        os.makedirs(os.path.join(out, name), exist_ok=True)
        save(tok, os.path.join(out, name, "tokenizer.json"), string_merges=name == "neox")
        with open(os.path.join(out, f"expected_{name}.jsonl"), "w", encoding="utf-8") as f:
            for line in expected_lines(tok, texts, seed=7):
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        print(f"{name}: vocab {tok.get_vocab_size()}", file=sys.stderr)


if __name__ == "__main__":
    main()
