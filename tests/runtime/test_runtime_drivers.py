"""The driver table: FLYAOT_DEVICE accepts exactly its names, and each name builds its driver."""
import pytest

from flyaot import targets
from flyaot.runtime import drivers
from flyaot.runtime.config import Config
from flyaot.runtime.drivers.base import ModuleDriver


def test_flyaot_device_is_validated_against_the_table(monkeypatch):
    for name in drivers.NAMES:
        monkeypatch.setenv("FLYAOT_DEVICE", name.upper())
        assert Config.from_env().device == name
    monkeypatch.setenv("FLYAOT_DEVICE", "rocm")
    with pytest.raises(ValueError, match="expected one of " + ", ".join(drivers.NAMES)):
        Config.from_env()


def test_every_gpu_driver_is_a_module_driver_and_names_itself():
    import importlib
    for name, where in drivers.DRIVERS.items():
        module, cls = where.split(":")
        driver_cls = getattr(importlib.import_module(f"{drivers.__name__}.{module}"), cls)
        assert driver_cls.name == name
        assert (name == "emu") != issubclass(driver_cls, ModuleDriver)
    with pytest.raises(ValueError, match="unknown driver 'nope'"):
        drivers.get("nope")


def test_emu_driver_reports_the_emulated_row():
    assert targets.get(drivers.get("emu").target(-1)).emulated
