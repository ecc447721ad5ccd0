"""nmt from Python: translate, score and evaluate as the ``nmt`` command does.

A thin layer over the extension ``nmt._nmt`` (nmt's public C++ API,
libnmt.so), shaped after CTranslate2's ``Translator``. Unlike CTranslate2,
nmt takes raw text: it runs SentencePiece itself, so a source is a string,
not a list of tokens, and a hypothesis is detokenised text.

Every option is fixed when the Translator is made (its memory bound and
worker pool are sized by them); translate_batch's search arguments are
accepted where they agree with the Translator's and refused where they do
not. Calls that translate or score release the GIL: Python threads can
share one Translator.
"""

from ._nmt import Error, MetricScore, TranslationResult, __version__
from . import _nmt

__all__ = ["Error", "MetricScore", "ScoringResult", "TranslationResult", "TranslationStats",
           "Translator", "score", "__version__"]

# CTranslate2's names for nmt's options (TranslateOptions' fields).
_ALIASES = {
    "beam_size": "beam",
    "num_hypotheses": "n_best",
    "length_penalty": "alpha",
    "inter_threads": "workers",
    "intra_threads": "threads",
}
# CTranslate2's compute types that mean "the model's own".
_MODEL_COMPUTE = ("default", "auto", "")


def _paths(model_path):
    if isinstance(model_path, (str, bytes)) or hasattr(model_path, "__fspath__"):
        return [str(model_path)]
    return [str(p) for p in model_path]


def _set_options(target, options):
    for key, value in options.items():
        name = _ALIASES.get(key, key)
        if key.startswith("_") or not hasattr(target, name):
            raise TypeError("unknown option %r" % key)
        setattr(target, name, value)


class TranslationStats:
    """What translate_file did: input lines (units) and the time it took."""

    def __init__(self, num_examples, total_time_in_ms):
        self.num_examples = num_examples
        self.total_time_in_ms = total_time_in_ms

    def __repr__(self):
        return "TranslationStats(num_examples=%d, total_time_in_ms=%.1f)" % (
            self.num_examples, self.total_time_in_ms)


class ScoringResult:
    """A pair's forced score, as ``nmt score -m`` gives it: log_prob (natural
    log, </s> included), tokens, log_prob_per_token, score (log_prob over the
    GNMT length penalty of alpha); with word_scores, each piece and its
    log-probability."""

    def __init__(self, record):
        self.log_prob = record["logprob"]
        self.tokens = record["tokens"]
        self.log_prob_per_token = record["logprob_per_token"]
        self.score = record["score"]
        self.pieces = record.get("pieces", [])
        self.token_log_probs = record.get("token_logprobs", [])

    def __repr__(self):
        return "ScoringResult(log_prob=%r, tokens=%d)" % (self.log_prob, self.tokens)


class Translator:
    """A model (or a list of models: an ensemble) loaded once.

    device: "cpu" or "cuda"; compute_type: "default" (the model file's),
    "f32", "bf16" or "int8"; workers: batches translated at once (0: the
    library's choice); threads: CPU threads of each (0: the cores shared
    out). Further keyword options are ``nmt translate``'s by their keys
    (beam, n_best, alpha, length_norm, max_length_a, max_length_b,
    sampling, batch_tokens, shortlist, alignments, attention, ...), or
    CTranslate2's names for them (beam_size, num_hypotheses,
    length_penalty, inter_threads, intra_threads). warn: a callable given
    each one-line warning; None writes them to standard error.
    """

    def __init__(self, model_path, device="cpu", compute_type="default", workers=0, threads=0,
                 warn=None, **options):
        self.model_paths = _paths(model_path)
        o = _nmt.TranslateOptions()
        o.device = device
        o.compute_type = "" if compute_type in _MODEL_COMPUTE else compute_type
        o.workers = workers
        o.threads = threads
        _set_options(o, options)
        self._options = o
        self._translator = _nmt.Translator(self.model_paths, o, warn)
        self._warn = warn
        self._scorer = None

    @property
    def options(self):
        """The TranslateOptions it was made with."""
        return self._options

    def describe(self):
        """How it translates: models, compute type, device, workers, batches."""
        return self._translator.describe()

    def _check_call(self, given):
        o = self._options
        for key, value in given.items():
            if value is None:
                continue
            name = _ALIASES.get(key, key)
            have = getattr(o, name)
            if value != have:
                raise Error("%s %r: this Translator was made with %s %r; nmt fixes its options "
                            "when a Translator is made, so give them to nmt.Translator"
                            % (key, value, name, have))

    def translate_batch(self, source, beam_size=None, num_hypotheses=None, length_penalty=None,
                        return_scores=True, return_alignment=False, return_attention=False):
        """Translates a list of strings (raw text, one sentence or line each).

        Returns a TranslationResult per source: hypotheses (best first) and
        scores (each one's search score, empty without return_scores), the
        best's logprob and tokens, and with return_alignment its word
        alignment (pairs of source and target word indices), with
        return_attention its pieces and cross-attention rows. Alignments and
        attention are computed for Translators made with alignments=True or
        attention=True (format="jsonl"). The outputs equal ``nmt translate``'s
        for the same options, byte for byte.
        """
        self._check_call({"beam_size": beam_size, "num_hypotheses": num_hypotheses,
                          "length_penalty": length_penalty})
        if return_alignment and not self._options.alignments:
            raise Error("return_alignment: this Translator computes no alignments; make it with "
                        "alignments=True")
        if return_attention and not self._options.attention:
            raise Error("return_attention: this Translator computes no attention; make it with "
                        "attention=True and format=\"jsonl\"")
        if isinstance(source, str):
            raise TypeError("source: a list of strings, not a string")
        results = self._translator.translate_batch(list(source))
        if not return_scores:
            return [_Unscored(r) for r in results]
        return results

    def translate(self, lines):
        """Each line's output exactly as ``nmt translate`` writes it (its
        output format: text, n-best, scores, jsonl), without the line break."""
        return self._translator.translate(list(lines))

    def translate_file(self, input_path, output_path):
        """Translates a file (plain or .gz) into another (.gz: compressed),
        byte for byte as ``nmt translate -i input_path -o output_path``."""
        import time
        start = time.perf_counter()
        lines = self._translator.translate_file(str(input_path), str(output_path))
        return TranslationStats(lines, (time.perf_counter() - start) * 1000)

    def score_batch(self, source, target, batch_tokens=None, alpha=None, word_scores=False):
        """Forced scores of each target after its source, as ``nmt score -m``
        gives them (a ScoringResult each). The first call loads the models
        once more, for scoring."""
        return self._scorer_for(batch_tokens, alpha, word_scores).score_batch(source, target)

    def _scorer_for(self, batch_tokens, alpha, word_scores):
        key = (batch_tokens, alpha, word_scores)
        if self._scorer is None or self._scorer[0] != key:
            options = {"word_scores": word_scores}
            if batch_tokens is not None:
                options["batch_tokens"] = batch_tokens
            if alpha is not None:
                options["alpha"] = alpha
            scorer = Scorer(self.model_paths, device=self._options.device,
                            compute_type=self._options.compute_type or "default", warn=self._warn,
                            **options)
            self._scorer = (key, scorer)
        return self._scorer[1]


class _Unscored:
    """A TranslationResult without its scores (return_scores=False)."""

    def __init__(self, r):
        self.hypotheses = r.hypotheses
        self.scores = []
        self.logprob = r.logprob
        self.tokens = r.tokens
        self.alignment = r.alignment
        self.source_pieces = r.source_pieces
        self.target_pieces = r.target_pieces
        self.attention = r.attention


class Scorer:
    """Forced scoring, as ``nmt score -m`` does it: the log-probability a model
    (or an ensemble) gives each target after its source. Options by
    ScoreOptions' keys: batch_tokens, alpha, word_scores."""

    def __init__(self, model_path, device="cpu", compute_type="default", warn=None, **options):
        o = _nmt.ScoreOptions()
        o.device = device
        o.compute_type = "" if compute_type in _MODEL_COMPUTE else compute_type
        _set_options(o, options)
        o.jsonl = True  # read back exactly, every number as the library computed it
        self._scorer = _nmt.Scorer(_paths(model_path), o, warn)

    def score_batch(self, source, target):
        import json
        return [ScoringResult(json.loads(line))
                for line in self._scorer.score(list(source), list(target))]


def score(hypotheses, references, metric="bleu", **options):
    """The corpus score of hypotheses against references, as sacreBLEU 2.6.0
    computes and prints it (``nmt score``): metric "bleu", "chrf" or "ter";
    references a list of strings, or a list of reference streams (lists of
    strings). Options by sacreBLEU's names: tokenize, lowercase, smooth,
    char_order, word_order, beta, chrf_whitespace, ter_normalized,
    ter_no_punct, ter_asian_support, ter_case_sensitive, width. Returns a
    MetricScore: score, signature, line (sacreBLEU's line)."""
    refs = list(references)
    if refs and isinstance(refs[0], str):
        refs = [refs]
    o = _nmt.MetricOptions()
    _set_options(o, options)
    return _nmt.corpus_score(metric, list(hypotheses), [list(r) for r in refs], o)
