#!/usr/bin/env python3
"""Extracts and cleans the demo model's training corpus from Debian packages.

Sources (licences checked in each package's /usr/share/doc/<package>/copyright; see MODEL_CARD.md):
  fortunes       BSD (University of California) - /usr/share/games/fortunes/*   (not fortunes-off)
  dict-jargon    public domain                  - /usr/share/dictd/jargon.dict.dz
  dict-devil     public domain (1911)           - /usr/share/dictd/devil.dict.dz
  wordnet-base   WordNet 3.0 licence (permissive, notice kept) - /usr/share/wordnet/data.*

Writes documents (one JSON string per line) to OUT/train.jsonl and OUT/heldout.jsonl; a document
goes to the held-out split when the SHA-256 of its text puts it in the lowest 2% (stable whatever
the order or the number of documents). Documents with any word of a small list of slurs are
dropped: the Devil's Dictionary is from 1911 and the model should not learn them.

usage: python3 tools/demo-model/extract-corpus.py OUT_DIR
"""
import base64
import glob
import gzip
import hashlib
import json
import os
import re
import sys

HELDOUT_PERCENT = 2
BLOCKED = re.compile(r"\b(nigger|niggers|negro|negroes|chink|chinks|jap|japs|kike|kikes|wop|wops|spic|spics|fag|fags|faggot|faggots|squaw|coolie|coolies|darky|darkies|dago|dagoes)\b", re.I)
DICT_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def dict_number(text):
    value = 0
    for ch in text:
        value = value * 64 + DICT_B64.index(ch)
    return value


def dict_entries(name):
    """(headword, body) of a dictd database, skipping its 00-database-* header entries."""
    data = gzip.open(f"/usr/share/dictd/{name}.dict.dz").read()
    seen = set()
    for line in open(f"/usr/share/dictd/{name}.index", encoding="utf-8"):
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 3 or parts[0].startswith("00-database") or parts[0].startswith("00database"):
            continue
        start, length = dict_number(parts[1]), dict_number(parts[2])
        if (start, length) in seen:
            continue
        seen.add((start, length))
        yield parts[0], data[start : start + length].decode("utf-8", "replace")


def reflow(text):
    """Joins the lines of each paragraph, keeps paragraph breaks, drops dictd's {cross-reference} braces."""
    text = text.replace("{", "").replace("}", "")
    paragraphs = re.split(r"\n\s*\n", text.strip())
    out = []
    for paragraph in paragraphs:
        lines = [line.strip() for line in paragraph.split("\n") if line.strip()]
        # Verse and quotations (lines indented more than prose, or short lines) keep their breaks.
        if len(lines) > 1 and max(len(line) for line in lines) < 50:
            out.append("\n".join(lines))
        else:
            out.append(" ".join(lines))
    return "\n\n".join(out)


def fortunes():
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if path.endswith((".dat", ".u8")) or os.path.islink(path) or os.path.isdir(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        for entry in text.split("\n%\n"):
            entry = entry.strip("\n%")
            # Fortunes are short and laid out by hand: keep their lines, trim trailing spaces.
            entry = "\n".join(line.rstrip() for line in entry.split("\n")).strip()
            if len(entry) >= 20:
                yield entry


def jargon():
    for head, body in dict_entries("jargon"):
        lines = body.split("\n")
        # The first line repeats the headword, the second its pronunciation and part of speech.
        text = reflow("\n".join(lines[1:]))
        text = re.sub(r"^/[^/\n]*/,?\s*", "", text)
        if len(text) >= 20:
            yield f"{head}: {text}"


def devil():
    for head, body in dict_entries("devil"):
        text = reflow(body)
        if len(text) >= 20:
            yield text


def wordnet():
    group = []
    for part in ["noun", "verb", "adj", "adv"]:
        for line in open(f"/usr/share/wordnet/data.{part}", encoding="utf-8", errors="replace"):
            if line.startswith("  "):
                continue  # the licence header
            fields, _, gloss = line.partition(" | ")
            words = fields.split()
            count = int(words[3], 16)
            lemma = words[4].replace("_", " ")
            gloss = gloss.strip()
            if count == 0 or not gloss:
                continue
            lemma = re.sub(r"\(.*\)$", "", lemma)
            group.append(f"{lemma}: {gloss}")
            if len(group) == 12:
                text = "\n".join(group)
                # WordNet is larger than the prose sources together: keep a third of it.
                if hashlib.sha256(text.encode("utf-8")).digest()[4] % 3 == 0:
                    yield text
                group = []


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    counts = {}
    with open(os.path.join(out_dir, "train.jsonl"), "w", encoding="utf-8") as train, open(
        os.path.join(out_dir, "heldout.jsonl"), "w", encoding="utf-8"
    ) as heldout:
        for source, documents in [("fortunes", fortunes()), ("jargon", jargon()), ("devil", devil()), ("wordnet", wordnet())]:
            kept = dropped = chars = held = 0
            for text in documents:
                text = text.replace("\r", "").replace("\t", "    ")
                if BLOCKED.search(text):
                    dropped += 1
                    continue
                digest = hashlib.sha256(text.encode("utf-8")).digest()
                is_heldout = int.from_bytes(digest[:4], "big") % 100 < HELDOUT_PERCENT
                (heldout if is_heldout else train).write(json.dumps(text, ensure_ascii=False) + "\n")
                kept += 1
                held += is_heldout
                chars += len(text)
            counts[source] = {"documents": kept, "heldout": held, "dropped": dropped, "characters": chars}
    json.dump(counts, open(os.path.join(out_dir, "corpus-stats.json"), "w"), indent=2)
    print(json.dumps(counts, indent=2))


if __name__ == "__main__":
    main()
