
import halide as hl
import math
from math import inf, nan
from torch._inductor.runtime import halide_helpers
from halide_xpu import halide_helpers as hx

def algorithm():
    in_ptr0 = hl.ImageParam(hl.Int(64), 2, 'in_ptr0')
    in_ptr1 = hl.ImageParam(hl.Float(32), 0, 'in_ptr1')
    in_ptr2 = hl.ImageParam(hl.Float(32), 0, 'in_ptr2')
    in_ptr3 = hl.ImageParam(hl.Float(32), 3, 'in_ptr3')
    in_ptr4 = hl.ImageParam(hl.Float(32), 2, 'in_ptr4')
    in_ptr5 = hl.ImageParam(hl.Float(32), 2, 'in_ptr5')
    out_ptr1 = hl.Func(hl.Float(32), 3, 'out_ptr1')
    h0 = hl.Var('h0')
    h1 = hl.Var('h1')
    h2 = hl.Var('h2')
    rdom = hl.RDom([hl.Range(0, 50257)])
    hr0 = rdom[0]
    tmp0 = hl.Func('tmp0')
    tmp0[h1, h2] = in_ptr0[1 + h1, h2]
    tmp1 = hl.Func('tmp1')
    tmp1[()] = hl.cast(hl.Int(64), -100)
    tmp2 = hl.Func('tmp2')
    tmp2[h1, h2] = tmp0[h1, h2] != tmp1[()]
    tmp3 = hl.Func('tmp3')
    tmp3[()] = hl.cast(hl.Int(64), 0)
    tmp4 = hl.Func('tmp4')
    tmp4[h1, h2] = hl.select(tmp2[h1, h2], tmp0[h1, h2], hl.cast(tmp0.type(), tmp3[()]))
    tmp5 = hl.Func('tmp5')
    tmp5[h0] = h0
    tmp6 = hl.Func('tmp6')
    tmp6[h0, h1, h2] = tmp4[h1, h2] == tmp5[h0]
    tmp7 = hl.Func('tmp7')
    tmp7[()] = hl.cast(hl.Float(32), hl.f64(-1.0))
    tmp8 = hl.Func('tmp8')
    tmp8[()] = hl.cast(hl.Float(32), hl.f64(0.0))
    tmp9 = hl.Func('tmp9')
    tmp9[h0, h1, h2] = hl.select(tmp6[h0, h1, h2], tmp7[()], hl.cast(tmp7.type(), tmp8[()]))
    tmp10 = hl.Func('tmp10')
    tmp10[()] = in_ptr1[()]
    tmp11 = hl.Func('tmp11')
    tmp11[()] = in_ptr2[()]
    tmp12 = hl.Func('tmp12')
    tmp12[()] = tmp10[()] / tmp11[()]
    tmp13 = hl.Func('tmp13')
    tmp13[h1, h2] = hl.select(tmp2[h1, h2], tmp12[()], hl.cast(tmp12.type(), tmp8[()]))
    tmp14 = hl.Func('tmp14')
    tmp14[h0, h1, h2] = hx.mul(tmp9[h0, h1, h2], tmp13[h1, h2])
    tmp15 = hl.Func('tmp15')
    tmp15[h1, h2] = hl.cast(hl.Float(32), 0)
    tmp15[h1, h2] = (tmp15[h1, h2] + tmp14[hr0, h1, h2])
    tmp16 = hl.Func('tmp16')
    tmp16[h0, h1, h2] = in_ptr3[h0, h1, h2]
    tmp17 = hl.Func('tmp17')
    tmp17[h1, h2] = in_ptr4[h1, h2]
    tmp18 = hl.Func('tmp18')
    tmp18[h0, h1, h2] = hx.sub(tmp16[h0, h1, h2], tmp17[h1, h2])
    tmp19 = hl.Func('tmp19')
    tmp19[h1, h2] = in_ptr5[h1, h2]
    tmp20 = hl.Func('tmp20')
    tmp20[h0, h1, h2] = hx.sub(tmp18[h0, h1, h2], tmp19[h1, h2])
    tmp21 = hl.Func('tmp21')
    tmp21[h0, h1, h2] = hx.exp(tmp20[h0, h1, h2])
    tmp22 = hl.Func('tmp22')
    tmp22[h0, h1, h2] = hx.mul(tmp21[h0, h1, h2], tmp15[h1, h2])
    tmp23 = hl.Func('tmp23')
    tmp23[h0, h1, h2] = hx.sub(tmp14[h0, h1, h2], tmp22[h0, h1, h2])
    out_ptr1[h0, h1, h2] = hl.cast(hl.Float(32), tmp23[h0, h1, h2])
    # buffer layouts (min, extent, stride per dimension, innermost first)
    in_ptr0.dim(0).set_bounds(0, 513).set_stride(1)
    in_ptr0.dim(1).set_bounds(0, 8).set_stride(513)
    in_ptr3.dim(0).set_bounds(0, 50257).set_stride(1)
    in_ptr3.dim(1).set_bounds(0, 512).set_stride(50257)
    in_ptr3.dim(2).set_bounds(0, 8).set_stride(25731584)
    in_ptr4.dim(0).set_bounds(0, 512).set_stride(1)
    in_ptr4.dim(1).set_bounds(0, 8).set_stride(512)
    in_ptr5.dim(0).set_bounds(0, 512).set_stride(1)
    in_ptr5.dim(1).set_bounds(0, 8).set_stride(512)
    out_ptr1.output_buffer().dim(0).set_bounds(0, 50257).set_stride(1)
    out_ptr1.output_buffer().dim(1).set_bounds(0, 512).set_stride(50257)
    out_ptr1.output_buffer().dim(2).set_bounds(0, 8).set_stride(25731584)
    return locals()
