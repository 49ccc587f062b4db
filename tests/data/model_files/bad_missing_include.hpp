#pragma once
#include "ukb/model.hpp"
#include "point_helpers.hpp"  // expect-error: point_helpers.hpp: No such file or directory
UKB_MODEL(Point)
