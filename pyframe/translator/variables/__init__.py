"""The symbolic values of the translator, one small class per kind of Python value."""
from .base import BoundMethodVariable, NullVariable, VariableTracker
from .builder import wrap
from .builtins import BuiltinVariable
from .constant import ConstantVariable
from .dicts import DictVariable
from .lists import ListVariable, SizeVariable, TupleVariable
from .functions import UserFunctionVariable
from .nn_module import NNModuleVariable
from .tensor import TensorVariable

__all__ = ["BoundMethodVariable", "BuiltinVariable", "ConstantVariable", "DictVariable", "ListVariable",
           "NNModuleVariable", "NullVariable", "SizeVariable", "TensorVariable", "TupleVariable",
           "UserFunctionVariable", "VariableTracker", "wrap"]
