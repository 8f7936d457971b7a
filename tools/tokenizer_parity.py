"""Prints the Python `tokenizers` library's encoding of varied texts as JSON lines, for anvil's live parity
test (tests/io/tokenizer_test.cpp) to compare against.

Usage: python3 tools/tokenizer_parity.py --tokenizer PATH [--seed N] [--n N]
Each line: {"text": ..., "ids": [...], "ids_special": [...]} (encode without / with special tokens).
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_textgen  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    tok = Tokenizer.from_file(args.tokenizer)
    out = sys.stdout
    for t in tokenizer_textgen.texts(args.seed, args.n):
        out.write(json.dumps({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids,
                              "ids_special": tok.encode(t, add_special_tokens=True).ids}, ensure_ascii=False))
        out.write("\n")


if __name__ == "__main__":
    main()
