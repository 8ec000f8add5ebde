#!/usr/bin/env bash
# Builds what a GPU-machine run carries (README, "Running on the GPU machines"), slimmed under the 64 MiB carry
# limit beside the tracked tree: .whl/halide312.tar.xz (halide 21 for Python 3.12 without Halide.h, bin/, share/,
# cmake files, static libraries and the Adams2019/Mullapudi2016 autoschedulers: the glue needs only the runtime
# headers) and .whl2/tv.tar.xz (timm + torchvision 0.26 without image codecs, plus pyyaml without its C extension,
# safetensors, packaging); with HX_PACK_HF=1 also .whl3/hf.tar.xz (transformers and its dependencies without what
# building a model from a config never imports: hf_xet, tokenizers, the CLI/pretty-printing and pydantic packages,
# and every transformers/models/* but auto, gpt2, llama, bert, t5, vit, encoder_decoder: 4 MB). Run from the project
# root; the folders are ignored through .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .git/info
for d in /.whl/ /.whl2/ /.whl3/; do grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fetch() {  # pip download for the GPU machine's Python 3.12, x86-64
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$tmp/w" "$@"
}
get() { fetch --no-deps "$@"; }
if [ ! -f .whl/halide312.tar.xz ]; then
  get "halide==${HALIDE_VERSION:-21.0.0}"
  mkdir -p "$tmp/h" .whl && (cd "$tmp/h" && unzip -q "$tmp"/w/halide-*.whl 'halide/*')
  h="$tmp/h/halide"
  rm -rf "$h/include/Halide.h" "$h/bin" "$h/share" "$h/lib64/cmake" "$h/lib/cmake"
  find "$h" \( -name '*.a' -o -name '*Adams2019*' -o -name '*Mullapudi2016*' \) -exec rm -rf {} +
  tar cf - -C "$tmp/h" halide | xz -9 -T2 > .whl/halide312.tar.xz
fi
if [ ! -f .whl2/tv.tar.xz ]; then
  rm -rf "$tmp/w" && get timm torchvision==0.26.0 pyyaml safetensors packaging
  mkdir -p "$tmp/s" .whl2 && for w in "$tmp"/w/*.whl; do unzip -q -o "$w" -d "$tmp/s"; done
  find "$tmp/s" \( -name 'image.so' -o -name 'libjpeg*' -o -name 'libpng*' -o -name 'libwebp*' -o -name 'libnvjpeg*' \
    -o -path '*/yaml/_yaml*.so' \) -exec rm -f {} +
  tar cf - -C "$tmp/s" . | xz -9 -T2 > .whl2/tv.tar.xz
fi
if [ "${HX_PACK_HF:-0}" = 1 ] && [ ! -f .whl3/hf.tar.xz ]; then
  rm -rf "$tmp/w" && fetch "transformers${TRANSFORMERS_VERSION:+==$TRANSFORMERS_VERSION}"  # with its dependencies
  (cd "$tmp/w" && rm -f torch-* triton-* numpy-* nvidia_* sympy-* mpmath-* networkx-* jinja2-* markupsafe-* \
    MarkupSafe-* filelock-* fsspec-* typing_extensions-* setuptools-* hf_xet-* tokenizers-* pygments-* rich-* \
    typer-* click-* shellingham-* markdown_it* mdurl-* annotated_doc-* pydantic* annotated_types-* \
    typing_inspection-* cuda_* pillow-*)
  mkdir -p "$tmp/hf" .whl3 && for w in "$tmp"/w/*.whl; do unzip -q -o "$w" -d "$tmp/hf"; done
  for m in "$tmp"/hf/transformers/models/*/; do
    case $(basename "$m") in auto|gpt2|llama|bert|t5|vit|encoder_decoder) ;; *) rm -rf "$m" ;; esac
  done
  tar cf - -C "$tmp/hf" . | xz -9 -T2 > .whl3/hf.tar.xz
fi
ls -la .whl/halide312.tar.xz .whl2/tv.tar.xz ${HX_PACK_HF:+.whl3/hf.tar.xz}
