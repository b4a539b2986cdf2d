"""The key/value cache of continuous batching (`agents.batching`): rows come and go, columns too.

One preallocated buffer per layer (rows x heads x columns x head dim) is written in place (no
concatenation per step, unlike transformers' `DynamicCache`): `BufferLayer`, a transformers cache
layer (a subclass of `DynamicLayer`, declared in `trainers.compat.BASES`). Rows are left-padded,
as `generate` pads them: every running row writes its next token at the same column, and a row
admitted later is placed so that its prompt ends at that column (`RowCache.place`). Columns no
running row uses any more are dropped from the left (`RowCache.drop_columns`), before the buffer
would grow, and rows that finish leave their seats to the last running rows
(`RowCache.release`). `RowCache` keeps the running rows' attention mask in step with the buffers.

`supports_model` says which models the cache can serve: decoder-only ones whose attention layers
are all full attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import Cache, DynamicLayer

__all__ = ["BufferLayer", "RowCache", "supports_model"]


def supports_model(model: Any) -> bool:
    """Whether `ContinuousBatcher` can run `model`: a decoder-only model (not an encoder-decoder)
    whose attention layers are all full attention (no sliding window, no linear attention)."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None)
    if layer_types is not None:
        return all(t == "full_attention" for t in layer_types)
    window = getattr(text, "sliding_window", None)
    # Mistral-style configs name a window without layer types; it only matters past its width.
    return window is None or window >= getattr(text, "max_position_embeddings", 0)


class BufferLayer(DynamicLayer):
    """One layer's keys and values in a preallocated buffer, written in place.

    The running rows hold slots ``0 .. rows - 1``; ``length`` columns are in use. `update` writes
    the new states at ``length`` and returns views of the used part.
    """

    def __init__(self) -> None:
        super().__init__()
        self.length = 0
        self.key_buffer: torch.Tensor | None = None
        self.value_buffer: torch.Tensor | None = None
        self.fixed = False  # a window into another layer's buffer: never reallocated

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def reserve(self, rows: int, columns: int, like: torch.Tensor) -> None:
        """Make room for `rows` x `columns`, keeping what is stored (states shaped like `like`:
        rows x heads x columns x head dim)."""
        if self.key_buffer is not None:
            have_rows, _, have_cols, _ = self.key_buffer.shape
            if have_rows >= rows and have_cols >= columns:
                return
            if self.fixed:
                raise RuntimeError(
                    f"a cache window of {have_rows} rows x {have_cols} columns cannot hold "
                    f"{rows} x {columns}: the batcher placed a prefill in too small a window"
                )
            # grow by half at least, so a buffer filled a column a step is not copied each step
            if rows > have_rows:
                rows = max(rows, have_rows + have_rows // 2)
            if columns > have_cols:
                columns = max(columns, have_cols + have_cols // 2)
            rows, columns = max(rows, have_rows), max(columns, have_cols)
        _, heads, _, dim = like.shape
        keys = like.new_zeros((rows, heads, columns, dim))
        values = like.new_zeros((rows, heads, columns, dim))
        if self.key_buffer is not None and self.value_buffer is not None:
            used_rows = self.key_buffer.shape[0]
            keys[:used_rows, :, : self.length] = self.key_buffer[:, :, : self.length]
            values[:used_rows, :, : self.length] = self.value_buffer[:, :, : self.length]
        self.key_buffer, self.value_buffer = keys, values
        self.lazy_initialization(like, like)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows, _, new, _ = key_states.shape
        end = self.length + new
        self.reserve(rows, end, key_states)
        assert self.key_buffer is not None and self.value_buffer is not None
        self.key_buffer[:rows, :, self.length : end] = key_states
        self.value_buffer[:rows, :, self.length : end] = value_states
        self.length = end
        self.keys = self.key_buffer[:rows, :, :end]
        self.values = self.value_buffer[:rows, :, :end]
        return self.keys, self.values

    @classmethod
    def window(cls, parent: BufferLayer, rows: slice, first_column: int) -> BufferLayer:
        """A layer writing into `parent`'s buffer in place: its `rows`, from `first_column` on
        (a prefill's states go straight into the running cache, no copy)."""
        assert parent.key_buffer is not None and parent.value_buffer is not None
        layer = cls()
        layer.key_buffer = parent.key_buffer[rows, :, first_column:]
        layer.value_buffer = parent.value_buffer[rows, :, first_column:]
        layer.lazy_initialization(layer.key_buffer, layer.value_buffer)
        layer.fixed = True
        return layer

    def get_seq_length(self) -> int:
        return self.length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def reset(self) -> None:
        self.length = 0
        self.key_buffer = self.value_buffer = None
        super().reset()


class RowCache:
    """The running rows' key/value states (one `BufferLayer` per model layer, as a transformers
    `Cache`) and their attention mask (rows x columns, 1 where a row attends). Row ``i`` of the
    batch holds seat ``i`` of every buffer; `mask` has one row per running row.

    Args:
        text_config: the model's text config (layers, key/value heads, head dim).
        dtype (`torch.dtype`), device (`torch.device`): of the states.
        reply_room (`int`): columns the first buffer keeps free for the rows' replies
            (`max_new_tokens`); later buffers grow as decoding needs.
    """

    def __init__(
        self, text_config: Any, dtype: torch.dtype, device: torch.device, reply_room: int
    ) -> None:
        text = text_config
        self.layers = [BufferLayer() for _ in range(text.num_hidden_layers)]
        heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        # the shape (rows x heads x columns x head dim) and dtype of the cache's states
        self.like = torch.empty((0, heads, 0, dim), dtype=dtype, device=device)
        self.cache = Cache(layers=list(self.layers))
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=device)
        self.device, self.reply_room = device, reply_room

    @property
    def running(self) -> int:
        """The rows seated (the mask's rows)."""
        return self.mask.shape[0]

    def fresh_layers(self) -> list[BufferLayer]:
        """Empty layers, one per model layer, for states kept apart (a shared prefix's)."""
        return [BufferLayer() for _ in self.layers]

    def windows(self, seats: slice, first_column: int) -> list[BufferLayer]:
        """Layers writing straight into every buffer's `seats`, from `first_column` on."""
        return [BufferLayer.window(layer, seats, first_column) for layer in self.layers]

    def place(self, count: int, width: int) -> int:
        """Makes room for `count` more rows whose prompts take `width` columns, ending at the
        running rows' current column (the running rows move right when the prompts are wider);
        returns that column."""
        running = self.running
        length = self.layers[0].length if running else 0
        buffer = self.layers[0].key_buffer
        if running and buffer is not None and max(width, length) >= buffer.shape[2]:
            first = self.first_used_column()
            if first:  # reclaim unused columns before growing
                self.drop_columns(first)
                length -= first
        shift = max(0, width - length)
        end = length + shift
        # The first buffer has room for the rows' replies; later ones grow as decoding needs
        # (`make_room` reclaims the columns of finished rows first).
        columns = end + 1 if buffer is not None else end + self.reply_room + 1
        for layer in self.layers:
            layer.reserve(running + count, columns, self.like)
            assert layer.key_buffer is not None and layer.value_buffer is not None
            if shift and running:
                for states in (layer.key_buffer, layer.value_buffer):
                    states[:running, :, shift:end] = states[:running, :, :length].clone()
            layer.length = end
        if shift and running:
            self.mask = torch.cat(
                [self.mask.new_zeros((running, shift)), self.mask[:running, :length]], dim=1
            )
        return end

    def seat(self, masks: Sequence[torch.Tensor], end: int) -> None:
        """Appends the attention masks of newly admitted rows (in seat order, each ending at
        column `end`) below the running rows'."""
        admitted = sum(len(mask) for mask in masks)
        running = self.running
        grown = torch.zeros((running + admitted, end), dtype=torch.long, device=self.device)
        if running:
            grown[:running] = self.mask
        seat = running
        for mask in masks:
            grown[seat : seat + len(mask), end - mask.shape[1] :] = mask
            seat += len(mask)
        self.mask = grown

    def extend(self) -> None:
        """Opens the next column for every running row (a decode step), dropping unused leading
        columns first when the buffer is full."""
        self.make_room()
        self.mask = torch.cat([self.mask, self.mask.new_ones((self.running, 1))], dim=1)

    def make_room(self) -> None:
        """Drops leading columns no running row uses, when the buffer is full."""
        layer = self.layers[0]
        assert layer.key_buffer is not None
        if layer.length < layer.key_buffer.shape[2]:
            return
        first = self.first_used_column()
        if first:  # else `update` grows the buffer
            self.drop_columns(first)

    def release(self, holes: Sequence[int], movers: Sequence[int], count: int) -> None:
        """Keeps the first `count` seats: the rows in seats `movers` move into seats `holes`
        (finished rows' seats; only the movers are copied). Columns only finished rows used are
        dropped when they are a good part of the width (attention runs over every column);
        `make_room` drops the rest when the buffer fills."""
        if holes:
            src = torch.tensor(movers, device=self.device)
            dst = torch.tensor(holes, device=self.device)
            for layer in self.layers:
                assert layer.key_buffer is not None and layer.value_buffer is not None
                for buffer in (layer.key_buffer, layer.value_buffer):
                    buffer[dst, :, : layer.length] = buffer[src, :, : layer.length]
            self.mask[dst] = self.mask[src]
        self.mask = self.mask[:count]
        if not count:
            for layer in self.layers:
                layer.length = 0
            self.mask = self.mask[:, :0]
            return
        first = self.first_used_column()
        if first >= max(16, self.layers[0].length // 4):
            self.drop_columns(first)

    def first_used_column(self) -> int:
        """The cache's first column a running row uses (its width when none does)."""
        used = self.mask.any(dim=0).nonzero()
        return int(used[0]) if len(used) else self.mask.shape[1]

    def drop_columns(self, first: int) -> None:
        """Drops the cache's first `first` columns (no running row uses them)."""
        rows = self.running
        for layer in self.layers:
            assert layer.key_buffer is not None and layer.value_buffer is not None
            keep = layer.length - first
            for buffer in (layer.key_buffer, layer.value_buffer):
                buffer[:rows, :, :keep] = buffer[:rows, :, first : layer.length].clone()
            layer.length = keep
        self.mask = self.mask[:, first:]
