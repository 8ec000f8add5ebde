
import halide as hl
import math
from math import inf, nan
from torch._inductor.runtime import halide_helpers
from halide_xpu import halide_helpers as hx

def algorithm():
    in_ptr0 = hl.ImageParam(hl.Int(64), 2, 'in_ptr0')
    in_ptr1 = hl.ImageParam(hl.Float(32), 3, 'in_ptr1')
    in_ptr2 = hl.ImageParam(hl.Float(32), 2, 'in_ptr2')
    in_ptr3 = hl.ImageParam(hl.Float(32), 2, 'in_ptr3')
    out_ptr2 = hl.Func(hl.Float(32), 1, 'out_ptr2')
    out_ptr3 = hl.Func(hl.Float(32), 1, 'out_ptr3')
    h0 = hl.Var('h0')
    h1 = hl.Var('h1')
    rdom = hl.RDom([hl.Range(0, 512), hl.Range(0, 8)])
    hr0 = rdom[0]
    hr1 = rdom[1]
    tmp0 = hl.Func('tmp0')
    tmp0[h0, h1] = in_ptr0[1 + h0, h1]
    tmp1 = hl.Func('tmp1')
    tmp1[()] = hl.cast(hl.Int(64), -100)
    tmp2 = hl.Func('tmp2')
    tmp2[h0, h1] = tmp0[h0, h1] != tmp1[()]
    tmp3 = hl.Func('tmp3')
    tmp3[h0, h1] = hl.cast(hl.Int(64), tmp2[h0, h1])
    tmp4 = hl.Func('tmp4')
    tmp4[()] = hl.cast(hl.Int(64), 0)
    tmp4[()] = (tmp4[()] + tmp3[hr0, hr1])
    tmp5 = hl.Func('tmp5')
    tmp5[()] = hl.cast(hl.Int(64), 0)
    tmp6 = hl.Func('tmp6')
    tmp6[h0, h1] = hl.select(tmp2[h0, h1], tmp0[h0, h1], hl.cast(tmp0.type(), tmp5[()]))
    tmp7 = hl.Func('tmp7')
    tmp7[()] = 50257
    tmp8 = hl.Func('tmp8')
    tmp8[h0, h1] = hx.add(tmp6[h0, h1], tmp7[()])
    tmp9 = hl.Func('tmp9')
    tmp9[h0, h1] = tmp6[h0, h1] < 0
    tmp10 = hl.Func('tmp10')
    tmp10[h0, h1] = hl.select(tmp9[h0, h1], tmp8[h0, h1], hl.cast(tmp8.type(), tmp6[h0, h1]))
    tmp11 = hl.Func('tmp11')
    tmp11[h0, h1] = hl.cast(hl.Int(32), tmp10[h0, h1])
    tmp12 = hl.Func('tmp12')
    tmp12[h0, h1] = hl.clamp(tmp11[h0, h1], 0, 50256)
    tmp13 = hl.Func('tmp13')
    tmp13[h0, h1] = in_ptr1[tmp12[h0, h1], h0, h1]
    tmp14 = hl.Func('tmp14')
    tmp14[h0, h1] = in_ptr2[h0, h1]
    tmp15 = hl.Func('tmp15')
    tmp15[h0, h1] = hx.sub(tmp13[h0, h1], tmp14[h0, h1])
    tmp16 = hl.Func('tmp16')
    tmp16[h0, h1] = in_ptr3[h0, h1]
    tmp17 = hl.Func('tmp17')
    tmp17[h0, h1] = hx.sub(tmp15[h0, h1], tmp16[h0, h1])
    tmp18 = hl.Func('tmp18')
    tmp18[h0, h1] = hx.neg(tmp17[h0, h1])
    tmp19 = hl.Func('tmp19')
    tmp19[()] = hl.cast(hl.Float(32), hl.f64(0.0))
    tmp20 = hl.Func('tmp20')
    tmp20[h0, h1] = hl.select(tmp2[h0, h1], tmp18[h0, h1], hl.cast(tmp18.type(), tmp19[()]))
    tmp21 = hl.Func('tmp21')
    tmp21[()] = hl.cast(hl.Float(32), 0)
    tmp21[()] = (tmp21[()] + tmp20[hr0, hr1])
    tmp22 = hl.Func('tmp22')
    tmp22[()] = hl.cast(hl.Float(32), tmp4[()])
    out_ptr2[hl.Var(),] = hl.cast(hl.Float(32), tmp22[()])
    tmp23 = hl.Func('tmp23')
    tmp23[()] = tmp21[()] / tmp22[()]
    out_ptr3[hl.Var(),] = hl.cast(hl.Float(32), tmp23[()])
    # buffer layouts (min, extent, stride per dimension, innermost first)
    in_ptr0.dim(0).set_bounds(0, 513).set_stride(1)
    in_ptr0.dim(1).set_bounds(0, 8).set_stride(513)
    in_ptr1.dim(0).set_bounds(0, 50257).set_stride(1)
    in_ptr1.dim(1).set_bounds(0, 512).set_stride(50257)
    in_ptr1.dim(2).set_bounds(0, 8).set_stride(25731584)
    in_ptr2.dim(0).set_bounds(0, 512).set_stride(1)
    in_ptr2.dim(1).set_bounds(0, 8).set_stride(512)
    in_ptr3.dim(0).set_bounds(0, 512).set_stride(1)
    in_ptr3.dim(1).set_bounds(0, 8).set_stride(512)
    out_ptr2.output_buffer().dim(0).set_bounds(0, 1).set_stride(1)
    out_ptr3.output_buffer().dim(0).set_bounds(0, 1).set_stride(1)
    return locals()
