#!/usr/bin/env python3
"""Writes a text-IR model of ResNet-style bottleneck blocks at one resolution, for measuring a
stage of ResNet-50 on its own: 1x1 4C->C, 3x3 C->C, 1x1 C->4C + residual, ReLUs; constant weights.

usage: bench/stage_model.py NAME C H BLOCKS > stage.ir   (ResNet-50: 64 56 3, 128 28 4, 256 14 6, 512 7 3)
then: irtool compile stage.ir -o stage.irx --no-validate && irtool bench stage.irx --threads 1"""

import sys

name,c,h,nb=sys.argv[1],*map(int,sys.argv[2:5])
C4=4*c
print('opset "" 13')
print(f'graph @{name}(%x: f32[1, {C4}, {h}, {h}]) {{')
def conv(i,x,ci,co,k,out):
    p=k//2
    print(f'  const %ws{i}: i64[4] = [{co}, {ci}, {k}, {k}]')
    print(f'  const %bs{i}: i64[1] = [{co}]')
    print(f'  %w{i} = ConstantOfShape(%ws{i}) {{value = f32[1] [{0.5/(ci*k*k)}]}} : f32[{co}, {ci}, {k}, {k}]')
    print(f'  %b{i} = ConstantOfShape(%bs{i}) {{value = f32[1] [0.01]}} : f32[{co}]')
    print(f'  %{out} = Conv({x}, %w{i}, %b{i}) {{kernel_shape = [{k}, {k}], pads = [{p}, {p}, {p}, {p}], strides = [1, 1]}} : f32[1, {co}, {h}, {h}]')
x='%x'
for b in range(nb):
    conv(3*b,x,C4,c,1,f'c{b}a'); print(f'  %r{b}a = Relu(%c{b}a) : f32[1, {c}, {h}, {h}]')
    conv(3*b+1,f'%r{b}a',c,c,3,f'c{b}b'); print(f'  %r{b}b = Relu(%c{b}b) : f32[1, {c}, {h}, {h}]')
    conv(3*b+2,f'%r{b}b',c,C4,1,f'c{b}c'); print(f'  %s{b} = Add(%c{b}c, {x}) : f32[1, {C4}, {h}, {h}]')
    print(f'  %o{b} = Relu(%s{b}) : f32[1, {C4}, {h}, {h}]'); x=f'%o{b}'
print(f'  return {x}\n}}')
