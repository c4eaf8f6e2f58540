"""Names the command line needs while it parses and checks options, kept free of heavy imports
(torch, Pyro, scikit-learn, matplotlib) so that ``--help`` and option errors return at once.
``tests/test_cli_startup.py`` checks them against the registries they mirror."""

#: observation families (:data:`pyro_memo.families.FAMILIES`)
FAMILY_NAMES = ("bern", "diag-gauss", "gauss", "known-diag-gauss", "known-gauss", "mult", "poisson", "zm-gauss")
#: each family's prior hyperparameters (``prior_names``) and, for the families that have one, the
#: hyperparameter ``--prior-scale`` multiplies (``spread_key``)
PRIOR_NAMES = {"bern": ("a", "b"), "diag-gauss": ("m", "kappa", "a", "b"), "gauss": ("m", "kappa", "nu", "B"),
               "known-diag-gauss": ("m", "S", "noise"), "known-gauss": ("m", "S", "noise"),
               "mult": ("lam",), "poisson": ("a", "b"), "zm-gauss": ("nu", "B")}
SPREAD_KEYS = {"diag-gauss": "b", "gauss": "B", "known-diag-gauss": "noise", "known-gauss": "noise", "zm-gauss": "B"}
#: prior keys that are matrices (set by --prior-scale, not by one number)
MATRIX_PRIORS = ("B", "S", "noise")
#: bundled DP-mixture datasets (:data:`pyro_memo.data.BUNDLED`)
DATASET_NAMES = ("digits", "toy-patches", "fashion-mnist")
#: DP-mixture moves (:data:`pyro_memo.inference.moves.MOVES`)
DP_MOVE_NAMES = ("birth", "delete", "greedy-merge", "merge")
#: DP-mixture comparison methods, in the order of :data:`pyro_memo.comparison.METHODS`
DP_METHOD_NAMES = ("memo", "memo-moves", "memo-incremental", "memo-exact", "vb", "svi-k0.5-d10", "svi-k0.5-d100",
                   "svi-k0.9-d10", "pyro-svi", "pyro-svi-trace", "sga", "sga+m", "sga+f", "gibbs-collapsed",
                   "gibbs-blocked", "sklearn-bgm")
#: HDP comparison methods, in the order of :data:`pyro_memo.comparison.TOPIC_METHODS`
TOPIC_METHOD_NAMES = ("memo", "memo-moves", "svi-k0.5-d10", "svi-k0.9-d10", "gensim-hdp", "tomotopy-hdp",
                      "tomotopy-lda")
#: relational comparison methods, in the order of :data:`pyro_memo.comparison.RELATIONAL_METHODS`
RELATIONAL_METHOD_NAMES = ("memo", "memo-moves", "memo-eb", "svi-hdp", "svi-ammsb", "louvain", "sbm")
#: the side of the patches ``denoise`` draws from the photographs to train a prior
#: (:data:`pyro_memo.denoising.PATCH`)
PATCH_SIDE = 8
#: EPLL's z-steps ``denoise --z-step`` offers (:data:`pyro_memo.denoising.epll.Z_STEPS`)
EPLL_Z_STEPS = ("map", "mmse")
#: the noise levels ``denoise --sigma`` takes (:data:`pyro_memo.denoising.images.SIGMA_RANGE`) and why
SIGMA_RANGE = (1e-6, 1e6)
SIGMA_RANGE_WHY = ("a standard deviation on the image's scale, 0-255 grey levels: smaller noise is lost in float64's "
                   "rounding of the pixels, larger overflows sigma**2 and the PSNR's squared error")
#: scikit-image's bundled photographs ``denoise`` and ``patches`` read (:data:`pyro_memo.denoising.PHOTOGRAPHS`)
PHOTOGRAPH_NAMES = ("astronaut", "brick", "camera", "cell", "chelsea", "clock", "coffee", "coins", "grass", "gravel",
                    "hubble_deep_field", "immunohistochemistry", "moon", "page", "retina", "rocket", "text")
