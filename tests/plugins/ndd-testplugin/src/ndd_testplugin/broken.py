"""An entry point that fails to import, to test that a broken plugin is reported."""

raise ImportError("ndd_testplugin.broken is broken on purpose")
