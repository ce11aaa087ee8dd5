// Pipeline stages (--pp P, --pp-split): a model's node list cut into P contiguous stages. A cut may only
// sit at a chain point, where exactly one value crosses: point c (between node c-1 and node c) is one when
// no node from c on reads a value written before node c-1's output, so the stages meet in one tensor
// (between resnet18's blocks, between vit's encoder layers or the two residual halves of one, between
// LeNet-5's layers; never inside a residual block, whose skip connection would cross too).
// The cut is balanced, minimising the costliest stage, by the layers' own cost (Model::node_cost: forward
// multiply-adds plus the floats written) or by node times measured at start (nn/node_timing.h, --pp-balance
// time: the cost model under-rates some layers, e.g. resnet18's 3x3 convs on 2x2-4x4 maps); or set by hand:
// --pp-split "c1,c2,..." names the node where each stage after the first starts.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/nn/model.h"

namespace ringtrain::nn {

struct StageCut {
  std::vector<int> begins;  // begins[s]: the first node of stage s; begins[P] = the node count
  int stages() const { return int(begins.size()) - 1; }
  int begin(int s) const { return begins[std::size_t(s)]; }
  int end(int s) const { return begins[std::size_t(s) + 1]; }
};

// The chain points of a model: every c in [1, nodes) where only value c crosses (increasing).
std::vector<int> chain_points(const Model& model);
// The cut into P stages with the smallest largest stage cost. Throws a one-line Error when the model has fewer than P - 1 chain points.
StageCut balanced_cut(const Model& model, int P);
// The same with given node costs (one a node, e.g. measured seconds).
StageCut balanced_cut(const Model& model, const std::vector<double>& node_costs, int P);
// The same with each stage's own node costs (P rows of one a node): stage s is priced by row s, e.g. node
// times measured on the ranks that run stage s, so a slower core gets less work. P = the row count.
StageCut balanced_cut(const Model& model, const std::vector<std::vector<double>>& stage_node_costs);
// --pp-split: P - 1 comma-separated node indices, increasing, each a chain point. Throws a one-line Error
// naming what is wrong (and the chain points there are) otherwise.
StageCut parse_cut(const std::string& text, const Model& model, int P);
// The cut --pp-split gives, or the balanced one when it is empty.
StageCut stage_cut(const Model& model, int P, const std::string& split);
// Each stage's sum of its own row over its nodes (rows[s][i]: node i priced for stage s, e.g. seconds).
std::vector<double> stage_sums(const StageCut& cut, const std::vector<std::vector<double>>& rows);
// A stage's cost per sample (sum of node_cost over its nodes).
double stage_cost(const Model& model, const StageCut& cut, int s);
// "stage 0: nodes 0-11 (conv1 .. layer2.1.relu2), 41% of the cost; stage 1: ..." for the start-up line.
std::string describe_cut(const Model& model, const StageCut& cut);
// The same with each stage's share of measured node times (seconds[s][i]: node i on stage s's ranks):
// "... 49.8% of the measured time (6.10 ms a micro-batch)".
std::string describe_cut(const Model& model, const StageCut& cut, const std::vector<std::vector<double>>& seconds);
// A cut of `whole` (its node indices: what --pp-split names) on `other`, the same architecture built with
// more nodes (vit under --tp has its f/g layers): each stage starts at other's first node named as whole's
// stage start, which must be a chain point there too.
StageCut map_cut(const Model& whole, const StageCut& cut, const Model& other);
// Stage s of whole (Model::cut; whole's layers move out).
std::unique_ptr<Model> take_stage(std::unique_ptr<Model> whole, const StageCut& cut, int s);

}  // namespace ringtrain::nn
