// Checkpoints on any process grid (--tp, --pp, both), still torchvision's whole tensors under their names
// (train/checkpoint.h): on save each stage's tensor shards are gathered over its tensor group
// (train/tp_checkpoint.h), then every tensor goes from the pipeline stage that holds it to the others
// (one broadcast a tensor over the pipeline group), weights, batch-norm buffers and optimizer state alike,
// and world rank 0 writes one ordinary file. On load every rank reads the whole file and keeps its stage's
// tensors (its shards of them under --tp). So a file written on any grid resumes on any other, a world of
// one included, and `ringtrain eval` reads it as it is.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "ringtrain/dist/process_grid.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::train {

// The whole model (nn::make_model(model.name())) holding every rank's tensors, and with an optimizer its
// whole state in `whole_optimizer`. Collective over the grid (every rank calls it); every rank ends with
// the whole tensors.
std::unique_ptr<nn::Model> gather_whole_model(const nn::Model& model, optim::Optimizer* optimizer,
                                              std::unique_ptr<optim::Optimizer>& whole_optimizer,
                                              dist::ProcessGrid& grid);
// Collective: gather_whole_model, then world rank 0 writes path.
void save_grid_checkpoint(const std::string& path, const nn::Model& model, optim::Optimizer* optimizer,
                          const std::map<std::string, std::string>& metadata, dist::ProcessGrid& grid);
// Local: the whole file's weights and buffers, this rank's part of them (strict, as load_weights).
void load_grid_weights(const std::string& path, nn::Model& model);

}  // namespace ringtrain::train
