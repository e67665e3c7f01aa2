"""Where variants plug in: parameters declared ROS-free and one table per kind of variant.

The bottom room: imports nothing else of the package. `Param` (params.py) is what nodes and
variant classes list; `VariantTable` (table.py) maps a parameter value to "module:Class" and
gathers the variants' parameters and checks; `choose_variant` (choice.py): a file given means
its variant.
"""
from vision_dialogue.variants.choice import AUTO, choose_variant
from vision_dialogue.variants.params import Param, nonempty
from vision_dialogue.variants.table import VariantTable, load_class

__all__ = ["AUTO", "Param", "VariantTable", "choose_variant", "load_class", "nonempty"]
