"""Names the command line needs while it parses and checks options, kept free of heavy imports
(torch, Pyro, scikit-learn, matplotlib) so that ``--help`` and option errors return at once.
``tests/test_cli_startup.py`` checks them against the registries they mirror."""

#: observation families (:data:`pyro_memo.families.FAMILIES`)
FAMILY_NAMES = ("bern", "diag-gauss", "gauss", "mult", "poisson", "zm-gauss")
#: bundled DP-mixture datasets (:data:`pyro_memo.data.BUNDLED`)
DATASET_NAMES = ("digits", "toy-patches", "fashion-mnist")
#: DP-mixture moves (:data:`pyro_memo.inference.moves.MOVES`)
DP_MOVE_NAMES = ("birth", "delete", "greedy-merge", "merge")
