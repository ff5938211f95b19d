pytest_plugins = ["tests.fix_db"]
