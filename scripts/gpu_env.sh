#!/usr/bin/env bash
# Source this at the start of a GPU-machine run: unpacks the carried halide wheel (.whl/halide312.tar.xz, from
# ../shared/tools/pack-halide-for-device.sh) and, when carried, the model packages (.whl7/hf.tar.xz: .whl6 plus
# transformers/models/t5; .whl6/hf.tar.xz, .whl3/hf.tar.xz or .whl2/hf.tar.xz) and puts them and the project on
# PYTHONPATH. timm + torchvision come apart in .whl2/tv.tar.xz
# (pack-wheels-for-device.sh tv nodeps:timm nodeps:torchvision==0.26.0).
set -e
mkdir -p /tmp/site /tmp/site2
[ -f /tmp/site/halide/__init__.py ] || tar xJf .whl/halide312.tar.xz -C /tmp/site
for hf in .whl7/hf.tar.xz .whl6/hf.tar.xz .whl5/hf.tar.xz .whl4/hf.tar.xz .whl3/hf.tar.xz .whl2/hf.tar.xz; do
  if [ -f "$hf" ] && [ ! -d /tmp/site2/transformers ]; then tar xJf "$hf" -C /tmp/site2; fi
done
if [ -f .whl2/tv.tar.xz ] && [ ! -d /tmp/site2/timm ]; then tar xJf .whl2/tv.tar.xz -C /tmp/site2; fi
# transformers now brings the hub `kernels` package, whose name benchmarks/kernels.py shadows (ImportError in
# transformers.activations): it is not needed to build models from configs
rm -rf /tmp/site2/kernels /tmp/site2/kernels-*.dist-info
export PYTHONPATH=/tmp/site:$PWD:/tmp/site2 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor-cache}
python3 -c "import torch, halide; print('torch', torch.__version__, 'cuda', torch.cuda.get_device_name())"
set +e
