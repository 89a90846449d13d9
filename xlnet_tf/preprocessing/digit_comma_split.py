"""`DigitCommaSplit`: the original XLNet rule that splits pieces like `▁1990,` into `▁1990` + `,`.

The released models were pretrained and fine-tuned on ids from
`prepro_utils.encode_pieces` (Hugging Face: `XLNetTokenizer._tokenize`), which
post-processes SentencePiece's pieces: a piece longer than one character that
ends in "," after a digit (`str.isdigit`) is re-encoded without the comma and
without any "▁", the re-encoding loses its leading "▁" when the original piece
had none, and "," follows as its own piece. Every id is then `PieceToId` of the
resulting piece text (a stripped piece missing from the vocabulary is `<unk>`).

The rule only looks at a piece's own text, so for one vocabulary it is a fixed
map `piece id -> replacement ids`, computed once here from the vocabulary and
applied to ids in Python (`split_ids`) or in the graph (`split_tf`, core
TensorFlow ops only, so SavedModels need nothing beyond tensorflow-text's
SentencePiece ops). The one case a table cannot see, an `<unk>` run whose own
text ends in "digit,", needs a vocabulary without a "," piece; XLNet
vocabularies have one.
"""

import numpy as np
import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"


def _tensorflow():
    """TensorFlow, for the in-graph (`*_tf`) variants only."""
    import tensorflow as tf  # import time: the Beam workers split pieces in Python, without TensorFlow

    return tf


class DigitCommaSplit:
    """The digit-comma rule compiled for one SentencePiece vocabulary.

    Args:
        processor: a `sentencepiece.SentencePieceProcessor` (the vocabulary).

    Example:
    >>> from xlnet_tf.preprocessing.digit_comma_split import DigitCommaSplit
    >>> split = DigitCommaSplit.from_proto(open("spiece.model", "rb").read())
    >>> split.split_ids(processor.encode("in 1990, the"))   # `▁1990,` -> `▁1990`, `,`
    """

    def __init__(self, processor):
        def piece_id(piece):
            # `piece_to_id` of text outside the vocabulary is `<unk>`, as the original's `PieceToId`.
            return int(processor.piece_to_id(piece))

        self.replacements = {}  # id -> tuple of ids
        self.replacement_pieces = {}  # id -> tuple of piece texts
        for token_id in range(processor.vocab_size()):
            if processor.is_control(token_id) or processor.is_unknown(token_id):
                continue
            piece = processor.id_to_piece(token_id)
            if not (len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()):
                continue
            pieces = list(processor.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str))
            if piece[0] != SPIECE_UNDERLINE and pieces and pieces[0][0] == SPIECE_UNDERLINE:
                pieces = pieces[1:] if len(pieces[0]) == 1 else [pieces[0][1:]] + pieces[1:]
            pieces.append(piece[-1])
            self.replacement_pieces[token_id] = tuple(pieces)
            self.replacements[token_id] = tuple(piece_id(p) for p in pieces)
        self._firing = frozenset(self.replacements)
        self._tables = None

    @classmethod
    def from_proto(cls, proto):
        """Builds the rule from a serialized SentencePiece model (`bytes`)."""
        return cls(spm.SentencePieceProcessor(model_proto=proto))

    @property
    def fires(self):
        """Whether the vocabulary has any piece the rule splits (if not, every method is the identity)."""
        return bool(self.replacements)

    # ------------------------------------------------------------------ Python

    def split_ids(self, ids):
        """Applies the rule to one sequence of ids (a list); returns a list."""
        return self._spliced(ids, ids, self.replacements)

    def split_pieces(self, ids, pieces):
        """Applies the rule to one sequence of piece texts, given their ids; returns a list."""
        return self._spliced(ids, pieces, self.replacement_pieces)

    def _spliced(self, ids, items, replacements):
        """`items` (one per id) with the item of each firing id replaced by `replacements[id]`."""
        if self._firing.isdisjoint(ids):
            return list(items)
        out = []
        for token_id, item in zip(ids, items):
            replacement = replacements.get(token_id)
            if replacement is None:
                out.append(item)
            else:
                out.extend(replacement)
        return out

    def split_flat(self, ids, row_lengths):
        """The rule on many sequences at once, in numpy: flat ids `[N]` cut into rows by `row_lengths` `[S]`.

        Equals `split_ids` row by row (tested) without a Python step per row or
        per id: the Beam pretraining job applies it to a whole batch of
        sentences.

        Args:
            ids: integer ids `[N]`, the rows concatenated.
            row_lengths: integer `[S]`, ids per row (sums to N).

        Returns:
            `(ids [N'], row_lengths [S])`: the split ids (same dtype) and the new lengths.

        Example:
        >>> import numpy as np
        >>> split.split_flat(np.array([37, 5, 9]), np.array([2, 1]))  # doctest: +SKIP
        (array([12, 4, 5, 9]), array([3, 1]))          # id 37 (`▁1990,`) -> 12, 4
        """
        ids = np.asarray(ids)
        row_lengths = np.asarray(row_lengths)
        if not self.fires or ids.size == 0:
            return ids, row_lengths
        t = self._build_tables()
        firing = t["firing"]
        at = np.flatnonzero(np.isin(ids, firing))  # [F']: positions of firing ids
        if at.size == 0:
            return ids, row_lengths
        table_row = np.searchsorted(firing, ids[at])  # [F']
        first, stop = t["splits"][table_row], t["splits"][table_row + 1]  # [F']
        counts = np.ones(ids.size, np.int64)  # [N]: output ids per input id
        counts[at] = stop - first
        out = np.repeat(ids, counts)  # [N']: a firing id is repeated, then overwritten below
        out_starts = np.cumsum(counts) - counts  # [N]
        replaced = (stop - first).astype(np.int64)  # [F']
        within = np.arange(int(replaced.sum())) - np.repeat(np.cumsum(replaced) - replaced, replaced)  # [R']
        out[np.repeat(out_starts[at], replaced) + within] = t["values"][np.repeat(first, replaced) + within]
        row_ends = np.concatenate([[0], np.cumsum(counts)])[np.cumsum(row_lengths)]  # [S]
        new_lengths = np.diff(np.concatenate([[0], row_ends])).astype(row_lengths.dtype)  # [S]
        return out, new_lengths

    def encode(self, processor, texts, **kwargs):
        """`processor.encode(texts, **kwargs)` (ids, batched) followed by the rule."""
        return [self.split_ids(ids) for ids in processor.encode(list(texts), **kwargs)]

    # ------------------------------------------------------------------ graph

    def _build_tables(self):
        if self._tables is None:
            firing = sorted(self.replacements)
            splits, values, pieces, suffix_bytes, byte_lengths = [0], [], [], [], []
            for token_id in firing:
                texts = self.replacement_pieces[token_id]
                lengths = [len(p.replace(SPIECE_UNDERLINE, "").encode("utf-8")) for p in texts[:-1]]
                values.extend(self.replacements[token_id])
                pieces.extend(texts)
                byte_lengths.extend(lengths + [0])
                # Bytes of the number's later sub-pieces: each sub-piece ends that far before the comma.
                suffix_bytes.extend([sum(lengths[i + 1:]) for i in range(len(lengths))] + [0])
                splits.append(len(values))
            self._tables = {
                "firing": np.array(firing, np.int32),  # [F], sorted
                "splits": np.array(splits, np.int32),  # [F + 1]
                "values": np.array(values, np.int32),  # [R]
                "pieces": np.array(pieces, object),  # [R]
                "byte_lengths": np.array(byte_lengths, np.int32),  # [R]
                "suffix_bytes": np.array(suffix_bytes, np.int32),  # [R]
            }
        return self._tables

    def _plan(self, flat_ids):
        """Where each output element comes from, for flat ids `[N]` (int32)."""
        tf = _tensorflow()

        t = self._build_tables()
        firing = tf.constant(t["firing"])
        splits = tf.constant(t["splits"])
        pos = tf.minimum(tf.searchsorted(firing, flat_ids), len(t["firing"]) - 1)  # [N]
        fires = tf.equal(tf.gather(firing, pos), flat_ids)  # [N]
        lengths = tf.where(fires, tf.gather(splits, pos + 1) - tf.gather(splits, pos), 1)  # [N]
        out_splits = tf.concat([[0], tf.cumsum(lengths)], axis=0)  # [N + 1]
        source = tf.ragged.row_splits_to_segment_ids(out_splits, out_type=tf.int32)  # [T]
        within = tf.range(tf.shape(source)[0]) - tf.gather(out_splits, source)  # [T]
        source_fires = tf.gather(fires, source)  # [T]
        table_index = tf.where(source_fires, tf.gather(tf.gather(splits, pos), source) + within, 0)  # [T]
        return {"fires": fires, "out_splits": out_splits, "source": source, "source_fires": source_fires,
                "table_index": table_index, "within": within, "lengths": lengths}

    def _apply(self, flat_values, plan, table):
        tf = _tensorflow()

        replaced = tf.gather(tf.constant(self._build_tables()[table]), plan["table_index"])  # [T]
        return tf.where(plan["source_fires"], tf.cast(replaced, flat_values.dtype),
                        tf.gather(flat_values, plan["source"]))

    @staticmethod
    def _restructure(like, values, out_splits):
        """Rebuilds `like`'s outer structure around the new flat `values`."""
        tf = _tensorflow()

        if not isinstance(like, tf.RaggedTensor):
            if like.shape.rank != 1:
                raise ValueError(f"DigitCommaSplit: ids must be 1-D or ragged, got shape {like.shape}.")
            return values

        def rebuild(ragged):
            if isinstance(ragged.values, tf.RaggedTensor):
                return ragged.with_values(rebuild(ragged.values))
            return tf.RaggedTensor.from_row_splits(
                values, tf.gather(out_splits, tf.cast(ragged.row_splits, tf.int32)), validate=False)

        return rebuild(like)

    def split_tf(self, ids, pieces=None):
        """The rule in TensorFlow ops.

        Args:
            ids: integer ids, a 1-D tensor `[P]` or a ragged tensor `[B, (P)]`.
            pieces: optional `tf.string` pieces with the same structure as `ids`
                (a tokenizer with `out_type=tf.string`); split alongside.

        Returns:
            The split ids (same dtype, 1-D or ragged `[B, (P')]`), or the split
            pieces when `pieces` is given.
        """
        tf = _tensorflow()

        if not self.fires:
            return ids if pieces is None else pieces
        flat = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
        plan = self._plan(tf.cast(flat, tf.int32))
        if pieces is None:
            values = self._apply(flat, plan, "values")
        else:
            flat_pieces = pieces.flat_values if isinstance(pieces, tf.RaggedTensor) else pieces
            values = self._apply(flat_pieces, plan, "pieces")
        return self._restructure(ids, values, plan["out_splits"])

    def split_with_offsets_tf(self, text, ids, starts, ends):
        """The rule on `tokenize_with_offsets` output, with byte offsets for the new pieces.

        The comma gets the bytes of the piece's last character; the number's
        sub-pieces share the bytes before it, cut by their lengths when the
        number is ASCII (all get the whole range otherwise, e.g. full-width digits
        that SentencePiece's NFKC mapped to ASCII).

        Args:
            text: the tokenized `tf.string`, scalar (with 1-D `ids`) or `[B]`
                (with ragged `[B, (P)]` ids).
            ids, starts, ends: `tokenize_with_offsets` results, same structure.

        Returns:
            `(ids, starts, ends)`, split, with the input structure.
        """
        tf = _tensorflow()

        if not self.fires:
            return ids, starts, ends
        ragged = isinstance(ids, tf.RaggedTensor)
        flat_ids = ids.flat_values if ragged else ids
        flat_starts = tf.cast(starts.flat_values if ragged else starts, tf.int32)  # [N]
        flat_ends = tf.cast(ends.flat_values if ragged else ends, tf.int32)  # [N]
        if ragged:
            rows = tf.cast(ids.value_rowids(), tf.int32)  # [N]  (ragged_rank 1, as tokenizers give)
            piece_text = tf.gather(text, rows)
        else:
            piece_text = tf.fill(tf.shape(flat_ids), text)  # [N]
        plan = self._plan(tf.cast(flat_ids, tf.int32))
        fires = plan["fires"]
        # Only firing pieces are cut out of the text; the others use a stand-in, so no substr can fail.
        surface = tf.where(fires, tf.strings.substr(piece_text, tf.where(fires, flat_starts, 0),
                                                    tf.where(fires, flat_ends - flat_starts, 0)), ",")
        surface = tf.where(tf.strings.length(surface) > 0, surface, ",")
        last_char = tf.strings.substr(surface, tf.fill(tf.shape(surface), -1), tf.ones_like(flat_starts),
                                      unit="UTF8_CHAR")
        comma_bytes = tf.strings.length(last_char)  # [N]
        number = tf.strings.substr(surface, tf.zeros_like(flat_starts), tf.strings.length(surface) - comma_bytes)
        ascii_number = tf.strings.regex_full_match(number, "[\\x00-\\x7f]*")  # [N]
        comma_start = flat_ends - comma_bytes  # [N]

        source = plan["source"]
        s = tf.gather(flat_starts, source)  # [T]
        e = tf.gather(flat_ends, source)
        c = tf.gather(comma_start, source)
        is_comma = tf.equal(plan["within"], tf.gather(plan["lengths"], source) - 1)
        t = self._build_tables()
        suffix = tf.gather(tf.constant(t["suffix_bytes"]), plan["table_index"])
        length = tf.gather(tf.constant(t["byte_lengths"]), plan["table_index"])
        exact = tf.gather(ascii_number, source)
        sub_end = tf.where(exact, tf.maximum(c - suffix, s), c)
        sub_start = tf.where(tf.logical_and(exact, plan["within"] > 0), tf.maximum(sub_end - length, s), s)
        new_starts = tf.where(plan["source_fires"], tf.where(is_comma, c, sub_start), s)
        new_ends = tf.where(plan["source_fires"], tf.where(is_comma, e, sub_end), e)
        new_ids = self._apply(flat_ids, plan, "values")
        out_splits = plan["out_splits"]
        return tuple(self._restructure(ids, v, out_splits) for v in (
            new_ids, tf.cast(new_starts, starts.dtype), tf.cast(new_ends, ends.dtype)))
