"""The models of the ``pyro-memo`` commands, one module each; every module here is imported
when the parser is built and registers its model with
:func:`pyro_memo.cli.registry.register_model`."""
