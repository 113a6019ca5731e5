"""Query-string and command-line filters, parsed once into analysis.frame.Filters."""

from __future__ import annotations

from django import forms

from analysis import alttest, current_report, ratings, stored_reports
from analysis.compute import Options
from analysis.exports import PASTE_LISTS
from analysis.frame import CONTROL, MEASURES, RUNS, Filters
from analysis.metrics import VERBOSITY_CONVENTIONS
from annotations.models import BloomLevel, Study


class FilterForm(forms.Form):
    min_ms = forms.IntegerField(
        required=False, min_value=0, label="Min. response time (ms)", help_text="Empty: the study's threshold."
    )
    ms_per_word = forms.IntegerField(required=False, min_value=0, label="+ ms per word")
    include_not_familiar = forms.BooleanField(required=False, label="Count not-familiar votes")
    include_flagged = forms.BooleanField(required=False, label="Count flagged raters")
    # Checkboxes, not a multi-select: no Ctrl-click, and usable on a phone.
    bloom = forms.MultipleChoiceField(
        required=False, choices=BloomLevel.choices, label="Bloom levels", widget=forms.CheckboxSelectMultiple
    )
    group = forms.MultipleChoiceField(required=False, choices=(), label="Groups", widget=forms.CheckboxSelectMultiple)
    subset = forms.MultipleChoiceField(
        required=False, choices=(), label="Subsets", widget=forms.CheckboxSelectMultiple, help_text="Of imported data."
    )
    since = forms.DateTimeField(required=False, label="Votes from")
    until = forms.DateTimeField(required=False, label="Votes until")
    measure = forms.ChoiceField(required=False, choices=[(m, m) for m in MEASURES], label="Length measure")
    bin_width = forms.IntegerField(required=False, min_value=1, max_value=10_000, label="Length bin width")
    verbosity_convention = forms.ChoiceField(
        required=False,
        choices=[(c, c) for c in VERBOSITY_CONVENTIONS],
        label="Longer answer wins",
        help_text="How a vote scores: tie_half (default) counts a tie as half a win; blog (the verbosity blog "
        "post's) draws a tie's winner at random and counts pairs of equal length (docs/STATISTICS.md).",
    )
    runs = forms.CharField(
        required=False,
        max_length=500,
        label="LLM runs",
        help_text="latest (default: each judge's latest complete run per item), all, or run ids like 3,5.",
    )
    # The Alternative Annotator Test's settings (analysis.alttest, docs/STATISTICS.md).
    alt_raters = forms.ChoiceField(
        required=False,
        choices=[(k, f"{k} (ε {e:g})") for k, e in sorted(alttest.EPSILON.items(), key=lambda kv: kv[1])],
        label="Raters are (alt-test)",
        help_text="Sets the margin ε a judge is granted for being cheaper: crowd workers 0.1 (default), "
        "skilled 0.15, experts 0.2.",
    )
    alt_epsilon = forms.FloatField(
        required=False, min_value=0, max_value=0.5, label="Alt-test ε", help_text="Empty: by who the raters are."
    )
    alt_min_votes = forms.IntegerField(
        required=False,
        min_value=2,
        max_value=100,
        label="Alt-test: human votes per item",
        help_text=f"Items with fewer are left out (default {alttest.MIN_VOTES}; the authors advise 3).",
    )
    alt_min_items = forms.IntegerField(
        required=False,
        min_value=2,
        max_value=100_000,
        label="Alt-test: items per rater tested",
        help_text=f"A rater with fewer is not tested but still counts among the others (default {alttest.MIN_ITEMS}).",
    )

    alt_reference = forms.ChoiceField(
        required=False,
        choices=[(k, k) for k in alttest.REFERENCES],
        label="Alt-test: scored against",
        help_text="raters (default, the paper's): the share of the other raters agreeing; dawid_skene: the "
        "Dawid-Skene consensus of the other raters, which trusts the reliable ones more.",
    )
    # The systems' ratings (analysis.ratings, docs/STATISTICS.md): the anchor printed at 1000 and
    # how the intervals resample.
    ratings_anchor = forms.ChoiceField(
        required=False,
        choices=(),
        label="Ratings: anchor system",
        help_text="The system printed at 1000 in the Systems section (empty: the first system in the study).",
    )
    ratings_bootstrap = forms.ChoiceField(
        required=False,
        choices=[(k, k) for k in ratings.BOOTSTRAP],
        label="Ratings: intervals resample",
        help_text="prompt (default): a prompt answered by several systems is one cluster; votes: Chatbot Arena's "
        "convention, to reproduce its published intervals.",
    )

    def __init__(
        self,
        *args,
        groups: list[str] = (),
        subsets: list[str] = (),
        known_runs: list[int] | None = None,
        systems: list[str] = (),
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["group"].choices = [(g, g) for g in groups]
        self.fields["subset"].choices = [(s, s) for s in subsets]
        self.known_runs = known_runs
        anchor = self.fields["ratings_anchor"]
        anchor.choices = [("", "the first system"), *((s, s) for s in systems)]
        # Django fills in %(value)s: a system's own "%" is escaped.
        listed = ", ".join(systems).replace("%", "%%") if systems else "none (its answers name no systems)"
        anchor.error_messages["invalid_choice"] = f"no system %(value)r in this study; its systems: {listed}"

    @classmethod
    def for_study(cls, data, *, study: Study) -> FilterForm:
        """The form for ``study``'s report: its groups, subsets and LLM judge runs are what may be
        picked. The dashboard, the API and the commands all build it here."""
        groups, _ = stored_reports.study_groups(study=study)
        return cls(
            data,
            groups=groups,
            subsets=current_report.study_subsets(study=study),
            known_runs=current_report.study_runs(study=study),
            systems=current_report.study_systems(study=study),
        )

    def clean_runs(self) -> tuple[str, list[int]]:
        """("latest" | "all", []) or ("picked", [ids]); ids must be runs of this study."""
        text = (self.cleaned_data.get("runs") or "latest").strip().lower()
        if text in RUNS:
            return (text, [])
        ids = []
        for part in text.replace(" ", "").split(","):
            if not part.isdigit() or int(part) < 1:
                raise forms.ValidationError(f"expected latest, all or run ids separated by commas, got {part!r}")
            ids.append(int(part))
        unknown = sorted(set(ids) - set(self.known_runs)) if self.known_runs is not None else []
        if unknown:
            raise forms.ValidationError(f"no run {', '.join(map(str, unknown))} in this study")
        return ("picked", sorted(set(ids)))

    def clean(self) -> dict:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("'Votes from' must be before 'Votes until'.")
        return data

    def filters(self) -> Filters:
        d = self.cleaned_data
        runs, run_ids = d.get("runs") or ("latest", [])
        # A perturbation group is measured against its question's control item (ASR, the LC
        # effect): picking groups keeps the control votes, or every ASR would have no base.
        groups = [*d.get("group"), CONTROL] if d.get("group") else []
        return Filters(
            min_ms=d.get("min_ms"),
            ms_per_word=d.get("ms_per_word"),
            include_not_familiar=bool(d.get("include_not_familiar")),
            include_flagged=bool(d.get("include_flagged")),
            blooms=list(d.get("bloom") or []),
            groups=groups,
            subsets=list(d.get("subset") or []),
            since=d.get("since"),
            until=d.get("until"),
            runs=runs,
            run_ids=list(run_ids),
        )

    def options(self, **overrides) -> Options:
        d = self.cleaned_data
        return Options(
            measure=d.get("measure") or "words",
            bin_width=d.get("bin_width") or 10,
            verbosity_convention=d.get("verbosity_convention") or "tie_half",
            alt_raters=d.get("alt_raters") or alttest.DEFAULT_RATERS,
            alt_epsilon=d.get("alt_epsilon"),
            alt_min_votes=d.get("alt_min_votes") or alttest.MIN_VOTES,
            alt_min_items=d.get("alt_min_items") or alttest.MIN_ITEMS,
            alt_reference=d.get("alt_reference") or "raters",
            ratings_anchor=d.get("ratings_anchor") or "",
            ratings_bootstrap=d.get("ratings_bootstrap") or "prompt",
            **overrides,
        )


class PowerForm(forms.Form):
    """The "how many votes do I need" page: a design and a judge to simulate."""

    n_questions = forms.IntegerField(min_value=10, max_value=2000, label="Questions")
    raters = forms.IntegerField(min_value=1, max_value=10_000, label="Raters")
    items_per_rater = forms.IntegerField(min_value=1, max_value=1000, label="Items per rater")
    susceptibility = forms.FloatField(
        min_value=-5,
        max_value=5,
        label="Pull towards the perturbed answer (log-odds)",
        help_text="0: unbiased on non-semantic perturbations; 1: strongly swayed.",
    )
    noise = forms.FloatField(min_value=0, max_value=5, label="Disagreement between items (log-odds sd)")
    tie_rate = forms.FloatField(min_value=0, max_value=0.9, label="Tie rate")

    pay_per_rater = forms.DecimalField(
        required=False,
        min_value=0,
        max_value=100_000,
        decimal_places=2,
        label="Pay per rater",
        help_text="What one rater is paid for the task (any currency): the recommendation then says what it costs.",
    )


class PaymentForm(forms.Form):
    """The payment file's one setting: the bonus per counted vote for raters who finished (the
    rater monitor's field, previewed there with the total; the payment links carry it)."""

    bonus_per_counted_vote = forms.DecimalField(
        required=False,
        min_value=0,
        max_value=100,
        decimal_places=2,
        label="Bonus per counted vote",
        help_text="Paid to each rater suggested for approval, for each of their counted votes (the study's "
        "currency on the platform, e.g. 0.05).",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "100", "inputmode": "decimal"}),
    )
    # Empty: the whole payment file (CSV); else one of the lists Prolific's bulk pages take.
    paste = forms.ChoiceField(
        required=False, choices=[("", "the payment file"), *((k, k) for k in PASTE_LISTS)], label="Paste list"
    )

    def clean(self) -> dict:
        data = super().clean()
        if data.get("paste") == "bonus" and not data.get("bonus_per_counted_vote"):
            raise forms.ValidationError(
                "the bulk bonus list needs a bonus per counted vote above 0 (the rater monitor's field): "
                "without one it would be empty"
            )
        return data
