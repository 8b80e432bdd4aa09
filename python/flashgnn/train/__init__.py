"""`flashgnn train`: mini-batch GNN training over an SSD-resident dataset (see :mod:`~flashgnn.train.trainer`).

    torchrun --nproc-per-node 2 -m flashgnn.train DATASET ...      # data-parallel (DDP)
"""
