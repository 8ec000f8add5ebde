
import halide as hl
import math
from math import inf, nan
from torch._inductor.runtime import halide_helpers
from halide_xpu import halide_helpers as hx

def algorithm():
    in_ptr0 = hl.ImageParam(hl.Float(32), 1, 'in_ptr0')
    in_ptr1 = hl.ImageParam(hl.Float(32), 2, 'in_ptr1')
    in_ptr2 = hl.ImageParam(hl.Float(32), 2, 'in_ptr2')
    in_ptr3 = hl.ImageParam(hl.Float(32), 1, 'in_ptr3')
    in_ptr4 = hl.ImageParam(hl.Float(32), 1, 'in_ptr4')
    out_ptr2 = hl.Func(hl.Float(32), 2, 'out_ptr2')
    out_ptr3 = hl.Func(hl.Float(32), 2, 'out_ptr3')
    out_ptr4 = hl.Func(hl.Float(32), 1, 'out_ptr4')
    h0 = hl.Var('h0')
    h1 = hl.Var('h1')
    rdom = hl.RDom([hl.Range(0, 768)])
    hr0 = rdom[0]
    tmp0 = hl.Func('tmp0')
    tmp0[h0] = in_ptr0[h0,]
    tmp1 = hl.Func('tmp1')
    tmp1[h0, h1] = in_ptr1[h0, h1]
    tmp2 = hl.Func('tmp2')
    tmp2[h0, h1] = hx.add(tmp0[h0], tmp1[h0, h1])
    tmp3 = hl.Func('tmp3')
    tmp3[h0, h1] = in_ptr2[h0, h1]
    tmp4 = hl.Func('tmp4')
    tmp4[h0, h1] = hx.add(tmp2[h0, h1], tmp3[h0, h1])
    tmp5 = hl.Func('tmp5')
    tmp6 = hl.Func('tmp6')
    tmp6[h1] = hl.cast(hl.Float(32), 0)
    tmp6[h1] = (tmp6[h1] + tmp4[hr0, h1])
    tmp7 = hl.Func('tmp7')
    tmp7[()] = 768
    tmp8 = hl.Func('tmp8')
    tmp8[()] = hl.cast(hl.Float(32), tmp7[()])
    tmp9 = hl.Func('tmp9')
    tmp9[h1] = tmp6[h1] / tmp8[()]
    tmp10 = hl.Func('tmp10')
    tmp10[h0, h1] = hx.sub(tmp4[h0, h1], tmp9[h1])
    tmp11 = hl.Func('tmp11')
    tmp11[h0, h1] = hx.mul(tmp10[h0, h1], tmp10[h0, h1])
    tmp12 = hl.Func('tmp12')
    tmp12[h1] = hl.cast(hl.Float(32), 0)
    tmp12[h1] = (tmp12[h1] + tmp11[hr0, h1])
    tmp13 = hl.Func('tmp13')
    tmp13[()] = hl.cast(hl.Float(32), hl.f64(768.0))
    tmp14 = hl.Func('tmp14')
    tmp14[h1] = tmp12[h1] / tmp13[()]
    tmp15 = hl.Func('tmp15')
    tmp15[()] = hl.cast(hl.Float(32), hl.f64(1e-12))
    tmp16 = hl.Func('tmp16')
    tmp16[h1] = hx.add(tmp14[h1], tmp15[()])
    tmp17 = hl.Func('tmp17')
    tmp17[h1] = 1./hl.sqrt(tmp16[h1])
    tmp18 = hl.Func('tmp18')
    tmp18[h0, h1] = hx.mul(tmp10[h0, h1], tmp17[h1])
    out_ptr2[h0, h1] = hl.cast(hl.Float(32), tmp18[h0, h1])
    tmp19 = hl.Func('tmp19')
    tmp19[h0] = in_ptr3[h0,]
    tmp20 = hl.Func('tmp20')
    tmp20[h0, h1] = hx.mul(tmp18[h0, h1], tmp19[h0])
    tmp21 = hl.Func('tmp21')
    tmp21[h0] = in_ptr4[h0,]
    tmp22 = hl.Func('tmp22')
    tmp22[h0, h1] = hx.add(tmp20[h0, h1], tmp21[h0])
    out_ptr3[h0, h1] = hl.cast(hl.Float(32), tmp22[h0, h1])
    tmp23 = hl.Func('tmp23')
    tmp23[()] = hl.cast(hl.Float(32), hl.f64(0.0013020833333333333))
    tmp24 = hl.Func('tmp24')
    tmp24[h1] = hx.mul(tmp17[h1], tmp23[()])
    out_ptr4[h1,] = hl.cast(hl.Float(32), tmp24[h1])
    # buffer layouts (min, extent, stride per dimension, innermost first)
    in_ptr0.dim(0).set_bounds(0, 768).set_stride(1)
    in_ptr1.dim(0).set_bounds(0, 768).set_stride(1)
    in_ptr1.dim(1).set_bounds(0, 4096).set_stride(768)
    in_ptr2.dim(0).set_bounds(0, 768).set_stride(1)
    in_ptr2.dim(1).set_bounds(0, 4096).set_stride(768)
    in_ptr3.dim(0).set_bounds(0, 768).set_stride(1)
    in_ptr4.dim(0).set_bounds(0, 768).set_stride(1)
    out_ptr2.output_buffer().dim(0).set_bounds(0, 768).set_stride(1)
    out_ptr2.output_buffer().dim(1).set_bounds(0, 4096).set_stride(768)
    out_ptr3.output_buffer().dim(0).set_bounds(0, 768).set_stride(1)
    out_ptr3.output_buffer().dim(1).set_bounds(0, 4096).set_stride(768)
    out_ptr4.output_buffer().dim(0).set_bounds(0, 4096).set_stride(1)
    return locals()
