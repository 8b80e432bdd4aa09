"""The reference NGCF the NGCF DFG is tested against: :mod:`flashgnn.nn.ngcf` (the model ``flashgnn train
--task link --model ngcf`` trains), under the name the DFG layer has always used."""

from flashgnn.nn.ngcf import NGCF, NGCFConv

__all__ = ["NGCF", "NGCFConv"]
