// The zoo's normalisation, activation, elementwise and Transformer ops (resnet18, mobilenet_v2, ViT), in one
// include for the kernel table.
#pragma once
#include "ringtrain/ops/attention.h"
#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/ops/elementwise.h"
#include "ringtrain/ops/layer_norm.h"
#include "ringtrain/ops/pointwise.h"
