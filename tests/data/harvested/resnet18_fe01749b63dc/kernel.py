
import halide as hl
import math
from math import inf, nan
from torch._inductor.runtime import halide_helpers
from halide_xpu import halide_helpers as hx

def algorithm():
    in_ptr0 = hl.ImageParam(hl.Int(8), 4, 'in_ptr0')
    in_ptr1 = hl.ImageParam(hl.Float(32), 4, 'in_ptr1')
    in_ptr2 = hl.ImageParam(hl.Float(32), 6, 'in_ptr2')
    in_ptr3 = hl.ImageParam(hl.Float(32), 6, 'in_ptr3')
    in_ptr4 = hl.ImageParam(hl.Float(32), 1, 'in_ptr4')
    in_ptr5 = hl.ImageParam(hl.Float(32), 1, 'in_ptr5')
    in_ptr6 = hl.ImageParam(hl.Float(32), 1, 'in_ptr6')
    out_ptr1 = hl.Func(hl.Float(32), 1, 'out_ptr1')
    out_ptr3 = hl.Func(hl.Float(32), 1, 'out_ptr3')
    out_ptr4 = hl.Func(hl.Float(32), 6, 'out_ptr4')
    h0 = hl.Var('h0')
    h1 = hl.Var('h1')
    h2 = hl.Var('h2')
    h3 = hl.Var('h3')
    h4 = hl.Var('h4')
    h5 = hl.Var('h5')
    rdom = hl.RDom([hl.Range(0, 2), hl.Range(0, 56), hl.Range(0, 2), hl.Range(0, 56), hl.Range(0, 32)])
    hr0 = rdom[0]
    hr1 = rdom[1]
    hr2 = rdom[2]
    hr3 = rdom[3]
    hr4 = rdom[4]
    tmp0 = hl.Func('tmp0')
    tmp0[h0, h1, h2, h3, h4, h5] = in_ptr0[h5, hl.min(h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp1 = hl.Func('tmp1')
    tmp1[()] = 9
    tmp2 = hl.Func('tmp2')
    tmp2[h0, h1, h2, h3, h4, h5] = hx.add(tmp0[h0, h1, h2, h3, h4, h5], tmp1[()])
    tmp3 = hl.Func('tmp3')
    tmp3[h0, h1, h2, h3, h4, h5] = tmp0[h0, h1, h2, h3, h4, h5] < 0
    tmp4 = hl.Func('tmp4')
    tmp4[h0, h1, h2, h3, h4, h5] = hl.select(tmp3[h0, h1, h2, h3, h4, h5], tmp2[h0, h1, h2, h3, h4, h5], hl.cast(tmp2.type(), tmp0[h0, h1, h2, h3, h4, h5]))
    tmp5 = hl.Func('tmp5')
    tmp5[h0, h1, h2, h3, h4, h5] = hl.cast(hl.Int(32), tmp4[h0, h1, h2, h3, h4, h5])
    tmp6 = hl.Func('tmp6')
    tmp6[h0, h1, h2, h3, h4, h5] = hl.clamp(tmp5[h0, h1, h2, h3, h4, h5], 0, 8)
    tmp7 = hl.Func('tmp7')
    tmp7[h0, h1, h2, h3, h4, h5] = in_ptr1[h5, hl.min(h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp8 = hl.Func('tmp8')
    tmp8[h0, h1, h2, h3, h4, h5] = (-113) + tmp6[h0, h1, h2, h3, h4, h5] + 2*hl.min(h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))) + 109*(tmp6[h0, h1, h2, h3, h4, h5] // 3) + 224*hl.min(h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2)))
    tmp9 = hl.Func('tmp9')
    tmp9[h0, h1, h2, h3] = h0 + 2*h1 + 112*h2 + 224*h3
    tmp10 = hl.Func('tmp10')
    tmp10[h0, h1, h2, h3, h4, h5] = tmp8[h0, h1, h2, h3, h4, h5] == tmp9[h0, h1, h2, h3]
    tmp11 = hl.Func('tmp11')
    tmp11[()] = hl.cast(hl.Float(32), hl.f64(0.0))
    tmp12 = hl.Func('tmp12')
    tmp12[h0, h1, h2, h3, h4, h5] = hl.select(tmp10[h0, h1, h2, h3, h4, h5], tmp7[h0, h1, h2, h3, h4, h5], hl.cast(tmp7.type(), tmp11[()]))
    tmp13 = hl.Func('tmp13')
    tmp13[h0, h1, h2, h3, h4, h5] = in_ptr0[h5, hl.min(1 + h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp14 = hl.Func('tmp14')
    tmp14[h0, h1, h2, h3, h4, h5] = hx.add(tmp13[h0, h1, h2, h3, h4, h5], tmp1[()])
    tmp15 = hl.Func('tmp15')
    tmp15[h0, h1, h2, h3, h4, h5] = tmp13[h0, h1, h2, h3, h4, h5] < 0
    tmp16 = hl.Func('tmp16')
    tmp16[h0, h1, h2, h3, h4, h5] = hl.select(tmp15[h0, h1, h2, h3, h4, h5], tmp14[h0, h1, h2, h3, h4, h5], hl.cast(tmp14.type(), tmp13[h0, h1, h2, h3, h4, h5]))
    tmp17 = hl.Func('tmp17')
    tmp17[h0, h1, h2, h3, h4, h5] = hl.cast(hl.Int(32), tmp16[h0, h1, h2, h3, h4, h5])
    tmp18 = hl.Func('tmp18')
    tmp18[h0, h1, h2, h3, h4, h5] = hl.clamp(tmp17[h0, h1, h2, h3, h4, h5], 0, 8)
    tmp19 = hl.Func('tmp19')
    tmp19[h0, h1, h2, h3, h4, h5] = in_ptr1[h5, hl.min(1 + h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp20 = hl.Func('tmp20')
    tmp20[h0, h1, h2, h3, h4, h5] = (-113) + tmp18[h0, h1, h2, h3, h4, h5] + 2*hl.min(1 + h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))) + 109*(tmp18[h0, h1, h2, h3, h4, h5] // 3) + 224*hl.min(h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2)))
    tmp21 = hl.Func('tmp21')
    tmp21[h0, h1, h2, h3, h4, h5] = tmp20[h0, h1, h2, h3, h4, h5] == tmp9[h0, h1, h2, h3]
    tmp22 = hl.Func('tmp22')
    tmp22[h3] = h3
    tmp23 = hl.Func('tmp23')
    tmp23[h2, h3] = hl.min(56, 1 + h3 + ((1 + h2) // 2))
    tmp24 = hl.Func('tmp24')
    tmp24[h2, h3] = tmp22[h3] < tmp23[h2, h3]
    tmp25 = hl.Func('tmp25')
    tmp25[h1] = 1 + h1
    tmp26 = hl.Func('tmp26')
    tmp26[h0, h1] = hl.min(56, 1 + h1 + ((1 + h0) // 2))
    tmp27 = hl.Func('tmp27')
    tmp27[h0, h1] = tmp25[h1] < tmp26[h0, h1]
    tmp28 = hl.Func('tmp28')
    tmp28[h0, h1, h2, h3] = tmp24[h2, h3] & tmp27[h0, h1]
    tmp29 = hl.Func('tmp29')
    tmp29[h0, h1, h2, h3, h4, h5] = tmp28[h0, h1, h2, h3] & tmp21[h0, h1, h2, h3, h4, h5]
    tmp30 = hl.Func('tmp30')
    tmp30[h0, h1, h2, h3, h4, h5] = hx.add(tmp12[h0, h1, h2, h3, h4, h5], tmp19[h0, h1, h2, h3, h4, h5])
    tmp31 = hl.Func('tmp31')
    tmp31[h0, h1, h2, h3, h4, h5] = hl.select(tmp29[h0, h1, h2, h3, h4, h5], tmp30[h0, h1, h2, h3, h4, h5], hl.cast(tmp30.type(), tmp12[h0, h1, h2, h3, h4, h5]))
    tmp32 = hl.Func('tmp32')
    tmp32[h0, h1, h2, h3, h4, h5] = in_ptr0[h5, hl.min(h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(1 + h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp33 = hl.Func('tmp33')
    tmp33[h0, h1, h2, h3, h4, h5] = hx.add(tmp32[h0, h1, h2, h3, h4, h5], tmp1[()])
    tmp34 = hl.Func('tmp34')
    tmp34[h0, h1, h2, h3, h4, h5] = tmp32[h0, h1, h2, h3, h4, h5] < 0
    tmp35 = hl.Func('tmp35')
    tmp35[h0, h1, h2, h3, h4, h5] = hl.select(tmp34[h0, h1, h2, h3, h4, h5], tmp33[h0, h1, h2, h3, h4, h5], hl.cast(tmp33.type(), tmp32[h0, h1, h2, h3, h4, h5]))
    tmp36 = hl.Func('tmp36')
    tmp36[h0, h1, h2, h3, h4, h5] = hl.cast(hl.Int(32), tmp35[h0, h1, h2, h3, h4, h5])
    tmp37 = hl.Func('tmp37')
    tmp37[h0, h1, h2, h3, h4, h5] = hl.clamp(tmp36[h0, h1, h2, h3, h4, h5], 0, 8)
    tmp38 = hl.Func('tmp38')
    tmp38[h0, h1, h2, h3, h4, h5] = in_ptr1[h5, hl.min(h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(1 + h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp39 = hl.Func('tmp39')
    tmp39[h0, h1, h2, h3, h4, h5] = (-113) + tmp37[h0, h1, h2, h3, h4, h5] + 2*hl.min(h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))) + 109*(tmp37[h0, h1, h2, h3, h4, h5] // 3) + 224*hl.min(1 + h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2)))
    tmp40 = hl.Func('tmp40')
    tmp40[h0, h1, h2, h3, h4, h5] = tmp39[h0, h1, h2, h3, h4, h5] == tmp9[h0, h1, h2, h3]
    tmp41 = hl.Func('tmp41')
    tmp41[h3] = 1 + h3
    tmp42 = hl.Func('tmp42')
    tmp42[h2, h3] = tmp41[h3] < tmp23[h2, h3]
    tmp43 = hl.Func('tmp43')
    tmp43[h1] = h1
    tmp44 = hl.Func('tmp44')
    tmp44[h0, h1] = tmp43[h1] < tmp26[h0, h1]
    tmp45 = hl.Func('tmp45')
    tmp45[h0, h1, h2, h3] = tmp42[h2, h3] & tmp44[h0, h1]
    tmp46 = hl.Func('tmp46')
    tmp46[h0, h1, h2, h3, h4, h5] = tmp45[h0, h1, h2, h3] & tmp40[h0, h1, h2, h3, h4, h5]
    tmp47 = hl.Func('tmp47')
    tmp47[h0, h1, h2, h3, h4, h5] = hx.add(tmp31[h0, h1, h2, h3, h4, h5], tmp38[h0, h1, h2, h3, h4, h5])
    tmp48 = hl.Func('tmp48')
    tmp48[h0, h1, h2, h3, h4, h5] = hl.select(tmp46[h0, h1, h2, h3, h4, h5], tmp47[h0, h1, h2, h3, h4, h5], hl.cast(tmp47.type(), tmp31[h0, h1, h2, h3, h4, h5]))
    tmp49 = hl.Func('tmp49')
    tmp49[h0, h1, h2, h3, h4, h5] = in_ptr0[h5, hl.min(1 + h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(1 + h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp50 = hl.Func('tmp50')
    tmp50[h0, h1, h2, h3, h4, h5] = hx.add(tmp49[h0, h1, h2, h3, h4, h5], tmp1[()])
    tmp51 = hl.Func('tmp51')
    tmp51[h0, h1, h2, h3, h4, h5] = tmp49[h0, h1, h2, h3, h4, h5] < 0
    tmp52 = hl.Func('tmp52')
    tmp52[h0, h1, h2, h3, h4, h5] = hl.select(tmp51[h0, h1, h2, h3, h4, h5], tmp50[h0, h1, h2, h3, h4, h5], hl.cast(tmp50.type(), tmp49[h0, h1, h2, h3, h4, h5]))
    tmp53 = hl.Func('tmp53')
    tmp53[h0, h1, h2, h3, h4, h5] = hl.cast(hl.Int(32), tmp52[h0, h1, h2, h3, h4, h5])
    tmp54 = hl.Func('tmp54')
    tmp54[h0, h1, h2, h3, h4, h5] = hl.clamp(tmp53[h0, h1, h2, h3, h4, h5], 0, 8)
    tmp55 = hl.Func('tmp55')
    tmp55[h0, h1, h2, h3, h4, h5] = in_ptr1[h5, hl.min(1 + h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))), hl.min(1 + h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2))), h4]
    tmp56 = hl.Func('tmp56')
    tmp56[h0, h1, h2, h3, h4, h5] = (-113) + tmp54[h0, h1, h2, h3, h4, h5] + 2*hl.min(1 + h1, (-1) + hl.min(56, 1 + h1 + ((1 + h0) // 2))) + 109*(tmp54[h0, h1, h2, h3, h4, h5] // 3) + 224*hl.min(1 + h3, (-1) + hl.min(56, 1 + h3 + ((1 + h2) // 2)))
    tmp57 = hl.Func('tmp57')
    tmp57[h0, h1, h2, h3, h4, h5] = tmp56[h0, h1, h2, h3, h4, h5] == tmp9[h0, h1, h2, h3]
    tmp58 = hl.Func('tmp58')
    tmp58[h0, h1, h2, h3] = tmp42[h2, h3] & tmp27[h0, h1]
    tmp59 = hl.Func('tmp59')
    tmp59[h0, h1, h2, h3, h4, h5] = tmp58[h0, h1, h2, h3] & tmp57[h0, h1, h2, h3, h4, h5]
    tmp60 = hl.Func('tmp60')
    tmp60[h0, h1, h2, h3, h4, h5] = hx.add(tmp48[h0, h1, h2, h3, h4, h5], tmp55[h0, h1, h2, h3, h4, h5])
    tmp61 = hl.Func('tmp61')
    tmp61[h0, h1, h2, h3, h4, h5] = hl.select(tmp59[h0, h1, h2, h3, h4, h5], tmp60[h0, h1, h2, h3, h4, h5], hl.cast(tmp60.type(), tmp48[h0, h1, h2, h3, h4, h5]))
    tmp62 = hl.Func('tmp62')
    tmp62[h0, h1, h2, h3, h4, h5] = in_ptr2[h5, h0, h1, h2, h3, h4]
    tmp63 = hl.Func('tmp63')
    tmp63[h0, h1, h2, h3, h4, h5] = tmp62[h0, h1, h2, h3, h4, h5] <= tmp11[()]
    tmp64 = hl.Func('tmp64')
    tmp64[h0, h1, h2, h3, h4, h5] = hl.select(tmp63[h0, h1, h2, h3, h4, h5], tmp11[()], hl.cast(tmp11.type(), tmp61[h0, h1, h2, h3, h4, h5]))
    tmp65 = hl.Func('tmp65')
    tmp65[h5] = hl.cast(hl.Float(32), 0)
    tmp65[h5] = (tmp65[h5] + tmp64[hr0, hr1, hr2, hr3, hr4, h5])
    out_ptr1[h5,] = hl.cast(hl.Float(32), tmp65[h5])
    tmp66 = hl.Func('tmp66')
    tmp66[h0, h1, h2, h3, h4, h5] = in_ptr3[h5, h0, h1, h2, h3, h4]
    tmp67 = hl.Func('tmp67')
    tmp67[h5] = in_ptr4[h5,]
    tmp68 = hl.Func('tmp68')
    tmp68[h0, h1, h2, h3, h4, h5] = hx.sub(tmp66[h0, h1, h2, h3, h4, h5], tmp67[h5])
    tmp69 = hl.Func('tmp69')
    tmp69[h0, h1, h2, h3, h4, h5] = hx.mul(tmp64[h0, h1, h2, h3, h4, h5], tmp68[h0, h1, h2, h3, h4, h5])
    tmp70 = hl.Func('tmp70')
    tmp70[h5] = hl.cast(hl.Float(32), 0)
    tmp70[h5] = (tmp70[h5] + tmp69[hr0, hr1, hr2, hr3, hr4, h5])
    tmp71 = hl.Func('tmp71')
    tmp71[h5] = in_ptr5[h5,]
    tmp72 = hl.Func('tmp72')
    tmp72[h5] = hx.mul(tmp70[h5], tmp71[h5])
    out_ptr3[h5,] = hl.cast(hl.Float(32), tmp72[h5])
    tmp73 = hl.Func('tmp73')
    tmp73[()] = hl.cast(hl.Float(32), hl.f64(2.4912308673469386e-06))
    tmp74 = hl.Func('tmp74')
    tmp74[h5] = hx.mul(tmp70[h5], tmp73[()])
    tmp75 = hl.Func('tmp75')
    tmp75[h5] = hx.mul(tmp71[h5], tmp71[h5])
    tmp76 = hl.Func('tmp76')
    tmp76[h5] = hx.mul(tmp74[h5], tmp75[h5])
    tmp77 = hl.Func('tmp77')
    tmp77[h0, h1, h2, h3, h4, h5] = hx.mul(tmp68[h0, h1, h2, h3, h4, h5], tmp76[h5])
    tmp78 = hl.Func('tmp78')
    tmp78[h0, h1, h2, h3, h4, h5] = hx.sub(tmp64[h0, h1, h2, h3, h4, h5], tmp77[h0, h1, h2, h3, h4, h5])
    tmp79 = hl.Func('tmp79')
    tmp79[h5] = hx.mul(tmp65[h5], tmp73[()])
    tmp80 = hl.Func('tmp80')
    tmp80[h0, h1, h2, h3, h4, h5] = hx.sub(tmp78[h0, h1, h2, h3, h4, h5], tmp79[h5])
    tmp81 = hl.Func('tmp81')
    tmp81[h5] = in_ptr6[h5,]
    tmp82 = hl.Func('tmp82')
    tmp82[h5] = hx.mul(tmp71[h5], tmp81[h5])
    tmp83 = hl.Func('tmp83')
    tmp83[h0, h1, h2, h3, h4, h5] = hx.mul(tmp80[h0, h1, h2, h3, h4, h5], tmp82[h5])
    out_ptr4[h5, h0, h1, h2, h3, h4] = hl.cast(hl.Float(32), tmp83[h0, h1, h2, h3, h4, h5])
    # buffer layouts (min, extent, stride per dimension, innermost first)
    in_ptr0.dim(0).set_bounds(0, 64).set_stride(1)
    in_ptr0.dim(1).set_bounds(0, 56).set_stride(64)
    in_ptr0.dim(2).set_bounds(0, 56).set_stride(3584)
    in_ptr0.dim(3).set_bounds(0, 32).set_stride(200704)
    in_ptr1.dim(0).set_bounds(0, 64).set_stride(1)
    in_ptr1.dim(1).set_bounds(0, 56).set_stride(64)
    in_ptr1.dim(2).set_bounds(0, 56).set_stride(3584)
    in_ptr1.dim(3).set_bounds(0, 32).set_stride(200704)
    in_ptr2.dim(0).set_bounds(0, 64).set_stride(1)
    in_ptr2.dim(1).set_bounds(0, 2).set_stride(64)
    in_ptr2.dim(2).set_bounds(0, 56).set_stride(128)
    in_ptr2.dim(3).set_bounds(0, 2).set_stride(7168)
    in_ptr2.dim(4).set_bounds(0, 56).set_stride(14336)
    in_ptr2.dim(5).set_bounds(0, 32).set_stride(802816)
    in_ptr3.dim(0).set_bounds(0, 64).set_stride(1)
    in_ptr3.dim(1).set_bounds(0, 2).set_stride(64)
    in_ptr3.dim(2).set_bounds(0, 56).set_stride(128)
    in_ptr3.dim(3).set_bounds(0, 2).set_stride(7168)
    in_ptr3.dim(4).set_bounds(0, 56).set_stride(14336)
    in_ptr3.dim(5).set_bounds(0, 32).set_stride(802816)
    in_ptr4.dim(0).set_bounds(0, 64).set_stride(1)
    in_ptr5.dim(0).set_bounds(0, 64).set_stride(1)
    in_ptr6.dim(0).set_bounds(0, 64).set_stride(1)
    out_ptr1.output_buffer().dim(0).set_bounds(0, 64).set_stride(1)
    out_ptr3.output_buffer().dim(0).set_bounds(0, 64).set_stride(1)
    out_ptr4.output_buffer().dim(0).set_bounds(0, 64).set_stride(1)
    out_ptr4.output_buffer().dim(1).set_bounds(0, 2).set_stride(64)
    out_ptr4.output_buffer().dim(2).set_bounds(0, 56).set_stride(128)
    out_ptr4.output_buffer().dim(3).set_bounds(0, 2).set_stride(7168)
    out_ptr4.output_buffer().dim(4).set_bounds(0, 56).set_stride(14336)
    out_ptr4.output_buffer().dim(5).set_bounds(0, 32).set_stride(802816)
    return locals()
