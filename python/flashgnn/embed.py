"""`flashgnn embed`: a checkpoint's model through :func:`flashgnn.inference`
(:mod:`flashgnn.nn.layerwise`), published as an embedding table.

    flashgnn embed DATASET OUT --checkpoint DIR [--model-class pkg.mod:Class [--model-kwargs JSON]]
                   [--output logits|hidden] [--batch-size 16384]

The checkpoint is a ``flashgnn train --checkpoint`` directory (one of the
built-in models, rebuilt from its ``model_config``) or, with
``--model-class``, a user's weights for the user's class
(:mod:`flashgnn.nn.usermodel`). ``--output hidden`` stops one layer short.
Output (published atomically): ``embeddings.npy``, ``predictions.npy`` (with
``--output logits``), ``embed.json`` — see :mod:`flashgnn.nn.layerwise`.

A typed dataset (its checkpoint's ``model_config`` has ``metadata``): the
model is rebuilt by :func:`flashgnn.nn.zoo.build_hetero_model` (``in_dim``
per type, ``embed``, ``target``, ``heads``) and run by
:func:`flashgnn.nn.layerwise.run_typed`; the output is
``embeddings/<node type>.npy`` per type the last layer outputs (a target
model: the target type; ``--output hidden``: every type the layer before
outputs), ``predictions/<target>.npy`` (with ``--output logits``) and
``embed.json`` (``node_types``: per type its rows, width and files).

A link-prediction checkpoint (``model_config`` ``task: "link"``): the
encoder's output is the embedding (its ``decoder.*`` weights are left out);
no ``predictions.npy`` (there are no classes); ``embed.json`` records
``task`` and ``decoder`` (``flashgnn recommend`` refuses a decoder other
than ``dot``).
"""

from __future__ import annotations

import os

from flashgnn._durable import check_output
from flashgnn.nn.layerwise import _layers_of, inference, run

__all__ = ["embed", "inference"]


def embed(dataset, checkpoint, out, batch_size: int = 16384, output: str = "logits", engine: str = "auto",
          device: str = "cpu", force: bool = False, progress: bool = True, model_class: str | None = None,
          model_kwargs: dict | None = None, memory_budget="auto", quiet: bool = False) -> dict:
    """``flashgnn embed``: a checkpoint's model through :func:`inference`.

    Without ``model_class``: a ``flashgnn train`` checkpoint directory (its
    ``model_config`` rebuilds one of the built-in models). With
    ``model_class="package.module:Class"``: the user's class, built with
    ``model_kwargs`` (or ``model_kwargs.json`` beside the weights), loaded
    from a plain ``state_dict`` file or a flashgnn checkpoint
    (:mod:`flashgnn.nn.usermodel`).

    ``memory_budget`` (``"auto"``, a size, or 0 for none) sizes a
    :class:`flashgnn.Cache` for the dataset (:func:`flashgnn.sample.shared.shared_cache`,
    one chunk of ``batch_size`` targets as the batch, one producer): layers
    after the first re-read the graph's structure through it. Its split is
    printed to stderr once, unless ``quiet``."""
    import flashgnn
    from flashgnn.nn.checkpoint import encoder_state, link_decoder, load_checkpoint, model_from_checkpoint
    from flashgnn.nn.zoo import normalize_features

    if output not in ("logits", "hidden"):
        raise ValueError(f"output {output!r}: expected logits or hidden")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be > 0, got {batch_size}")
    check_output(out, force, (dataset, checkpoint))  # the --force rule of every publishing command, before any work
    ds = flashgnn.open(dataset)
    norm = "none"
    link = {}  # a link checkpoint's task and decoder, recorded in embed.json (`flashgnn recommend` reads them)
    if model_class is None:
        if model_kwargs is not None:
            raise ValueError("model_kwargs given without model_class (a flashgnn checkpoint records its own)")
        if os.path.isfile(checkpoint):
            raise ValueError(f"{checkpoint} is a file: a flashgnn checkpoint is the directory `flashgnn train "
                             "--checkpoint DIR` wrote; for weights saved with torch.save(model.state_dict(), f) "
                             "name the model's class with --model-class package.module:ClassName (and --model-kwargs)")
        state = load_checkpoint(checkpoint)
        decoder = link_decoder(state)  # a link model: its encoder embeds, the decoder scores pairs (not run here)
        try:
            state = encoder_state(state)
        except ValueError as e:
            raise ValueError(f"{checkpoint}: {e}") from None
        cfg = state["model_config"]
        if ds.is_typed != ("metadata" in cfg):
            raise ValueError(f"{checkpoint}: a model of a {'typed' if 'metadata' in cfg else 'homogeneous'} dataset; "
                             f"{ds.path} is {'typed' if ds.is_typed else 'homogeneous'}")
        if ds.is_typed:
            _check_typed(checkpoint, cfg, ds)
        elif cfg["in_dim"] != ds.feature_dim:
            raise ValueError(f"{checkpoint}: model_config.in_dim {cfg['in_dim']} != feature_dim {ds.feature_dim} of "
                             f"{ds.path}")
        model = model_from_checkpoint(state)
        name, norm = cfg["model"], cfg.get("normalize_features", "none")
        if decoder is not None:
            link = dict(task="link", decoder=decoder)
    else:
        from flashgnn.nn.usermodel import load_user_model

        model, norm = load_user_model(model_class, checkpoint, model_kwargs)
        name = model_class
    model = model.to(device)
    from flashgnn.sample.shared import shared_cache

    if ds.is_typed:
        # No shared cache is sized for a typed dataset yet (as its loader): every layer reads the structure again.
        cache = None
        total = int(model.num_layers)
    else:
        cache = shared_cache(ds, [-1], batch_size, memory_budget, prefetch=1, quiet=quiet, who="flashgnn embed")
        total = max(_layers_of(model)[0], 1)
    layers = total
    if output == "hidden":
        if total < 2:
            raise ValueError("--output hidden needs a model with at least 2 layers")
        layers = total - 1
    return run(model, ds, out, batch_size=batch_size, device=device, engine=engine, progress=progress, layers=layers,
               force=force, predictions=output == "logits" and not link, max_bytes=None, tmp_dir=None,
               x_transform=lambda x: normalize_features(x, norm),  # as the model was trained
               inputs=(checkpoint,), meta_extra=dict(checkpoint=os.path.abspath(checkpoint), model=name, output=output,
                                                     memory_budget=(cache.split if cache is not None else 0),
                                                     **link),
               cache=cache)


def _check_typed(checkpoint, cfg: dict, ds) -> None:
    """A typed checkpoint's model fits the dataset: the same node and edge types, the same feature widths."""
    from flashgnn.nn.checkpoint import checkpoint_metadata

    meta = checkpoint_metadata(cfg)
    if (list(meta[0]), list(meta[1])) != (list(ds.node_types), list(ds.edge_types)):
        raise ValueError(f"{checkpoint}: the model was trained on node types {meta[0]} and edge types {meta[1]}; "
                         f"{ds.path} has {ds.node_types} and {ds.edge_types}")
    have = {t: ds.node_type(t)["features"]["dim"] for t in ds.node_types if ds.node_type(t).get("features")}
    if dict(cfg["in_dim"]) != have:
        raise ValueError(f"{checkpoint}: model_config.in_dim {dict(cfg['in_dim'])} != the feature widths of "
                         f"{ds.path}: {have}")
