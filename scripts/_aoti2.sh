source scripts/gpu_env.sh >/dev/null
mkdir -p $OUT/a
g++ --version | head -1 > $OUT/a/info.txt
g++ -print-file-name=libstdc++.so.6 >> $OUT/a/info.txt
python3 -c "import torch; print([l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l][:1])" >> $OUT/a/info.txt
SYS=$(g++ -print-file-name=libstdc++.so.6)
timeout 120 python3 scripts/probe_aoti_cuda.py /tmp/p1 triton > $OUT/a/triton_plain.log 2>&1
PROBE_PRELOAD=$SYS timeout 100 python3 scripts/probe_aoti_cuda.py /tmp/p2 triton > $OUT/a/triton_preload.log 2>&1
PROBE_PRELOAD=$SYS timeout 150 python3 scripts/probe_aoti_cuda.py /tmp/p3 halide_xpu > $OUT/a/hx_preload.log 2>&1
cat $OUT/a/info.txt; for f in $OUT/a/*.log; do echo == $f; grep -v "^#[0-9]\|Warning\|return cls" $f | tail -6; done
