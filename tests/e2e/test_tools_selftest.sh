#!/usr/bin/env bash
# The Python test tools against independent implementations (tests/tools/selftest.py, all of
# it: a few seconds): hfmodel.py's NumPy reference forward of every variant against a naive
# incremental one written out from transformers' modelling code, the features each variant is
# there for, F16/BF16 and shards, the byte-level tokenizer, llama2c_to_hf.py against run.c's
# logits, compare_logits.py's exit codes. The e2e tests take these tools' numbers as the truth:
# a wrong reference would let a wrong runtime pass.
source "$(dirname "$0")/lib.sh"
if ! $PY -c "import numpy" 2>/dev/null; then
  echo "skipping: $PY has no numpy"
  exit 0
fi
check "tests/tools/selftest.py: every check passes" $PY "$TOOLS/selftest.py"
finish
