#!/usr/bin/env python3
print("not a model")
