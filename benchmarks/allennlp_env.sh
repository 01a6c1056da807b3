#!/usr/bin/env bash
# Build a virtual environment (default: allennlp-env) in which allennlp 2.10.1's `Elmo` runs on
# this machine's torch 2.13, for benchmarks/allennlp_parity.py. allennlp pins torch < 1.13,
# transformers < 4.21 and spacy < 3.4, none of which install on Python 3.11 here, so allennlp is
# installed without its pins: it sees torch and contextvec from the system site-packages, and
# torchvision (imported by allennlp's image modules only; no CPU build exists here) is an empty
# stand-in. Nothing of this is a contextvec dependency.
set -euo pipefail
ENV=${1:-allennlp-env}
python -m venv --system-site-packages "$ENV"
PIP="$ENV/bin/pip"
"$PIP" install -q --no-deps allennlp==2.10.1 cached-path==1.1.6 fairscale==0.4.13 \
  lmdb dill base58 more-itertools tensorboardX termcolor
"$PIP" install -q "transformers<4.50" "spacy<3.8" boto3 google-cloud-storage filelock rich
"$PIP" install -q --no-deps "huggingface-hub==0.26.5"
SITE=$("$ENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p "$SITE/torchvision/ops"
echo '"""Empty stand-in: allennlp imports torchvision for its image modules only."""' > "$SITE/torchvision/__init__.py"
echo 'class ImageReadMode: RGB = None' > "$SITE/torchvision/io.py"
touch "$SITE/torchvision/ops/__init__.py" "$SITE/torchvision/ops/boxes.py"
"$ENV/bin/python" -c "import torch; from allennlp.modules.elmo import Elmo; print('allennlp Elmo on torch', torch.__version__)"
