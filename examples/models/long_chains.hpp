// A model file of chains longer than the built-in planar_chain_3/6/12
// (docs/adding-a-model.md): the built-in PlanarChain template
// (include/ukb/models/planar_chain.hpp) with 24 and 48 links, so that the
// cost of the linear algebra can be measured where it dominates (issue 22:
// n = 48 and 96 coordinates; bench/README, W5 and W6). The number of links
// is a compile-time constant of the model (its sizes n = 2K and m = K size
// every array of the kernels): another length is one more line here.
//   ukb run examples/models/long_chains.toml   (planar_chain_24; with
//   model = "long_chains.hpp:PlanarChain48" in the config, the other)
#pragma once

#include "ukb/models/planar_chain.hpp"

template <class T>
using PlanarChain24 = ukb::models::PlanarChain<T, 24>;
template <class T>
using PlanarChain48 = ukb::models::PlanarChain<T, 48>;

UKB_MODEL(PlanarChain24)
UKB_MODEL(PlanarChain48)
