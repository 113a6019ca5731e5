"""What a new study does by default (attention checks flag below 0.75, fast votes are told), a
question's better answer on its perturbed items, an expected length as a note rather than a
warning in variants' stored checks, and attention checks without a Bloom level."""

from django.db import migrations, models


def inherit_better_answers(apps, schema_editor):
    """Perturbed items without a better answer take their question's (its control item's), as
    ComparisonItem.inherited_better_answer names it: A1 for a degrading kind, else the better
    original's side in the item. Items with one of their own keep it."""
    ComparisonItem = apps.get_model("annotations", "ComparisonItem")
    controls = ComparisonItem.objects.filter(kind__isnull=True).exclude(gold_label="")
    told = {c.question_id: c.answer_a1_id if c.gold_label == "a1" else c.answer_a2_id for c in controls}
    unknown = ComparisonItem.objects.filter(kind__isnull=False, gold_label="", question_id__in=list(told))
    for item in unknown.select_related("kind").iterator():
        if item.kind.semantics == "degrading":
            item.gold_label = "a1"
        else:
            item.gold_label = "a1" if told[item.question_id] == item.answer_a1_id else "a2"
        item.save(update_fields=["gold_label"])


def expected_length_is_a_note(apps, schema_editor):
    """A variant's stored checks said its expected added length (a kind whose length is the
    perturbation) as a warning, so "with warnings only" listed it: it becomes a note, as
    perturbations.checks now writes it, and the variant is ok if nothing else is wrong."""
    Answer = apps.get_model("annotations", "Answer")
    for answer in Answer.objects.filter(checks__ok=False).iterator():
        warnings = answer.checks.get("warnings", [])
        notes = [w for w in warnings if w.startswith("length:") and "the added length is what this kind does" in w]
        if notes:
            kept = [w for w in warnings if w not in notes]
            answer.checks = {**answer.checks, "warnings": kept, "notes": notes, "ok": not kept}
            answer.save(update_fields=["checks"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0030_study_data_version"),
    ]

    operations = [
        migrations.AlterField(
            model_name="comparisonitem",
            name="gold_label",
            field=models.CharField(
                blank=True,
                choices=[("a1", "A1"), ("a2", "A2")],
                default="",
                help_text="The answer known to be better (a1 or a2), against which each judge's accuracy is given; empty: unknown. A perturbed item inherits its question's (the control item's), A1 for a degrading kind.",
                max_length=2,
                verbose_name="better answer",
            ),
        ),
        migrations.AlterField(
            model_name="lease",
            name="is_gold",
            field=models.BooleanField(default=False, verbose_name="attention check"),
        ),
        migrations.AlterField(
            model_name="question",
            name="is_gold",
            field=models.BooleanField(
                default=False,
                help_text="An attention-check question (A1 plainly better), never part of the metrics. Not the same as an item's better answer, against which judges' accuracy is given.",
                verbose_name="attention check",
            ),
        ),
        migrations.AlterField(
            model_name="study",
            name="fast_notice",
            field=models.BooleanField(
                default=True,
                help_text="Tell a rater, gently, when a vote came faster than the minimum response time (the vote is stored all the same, and not counted).",
            ),
        ),
        migrations.AlterField(
            model_name="study",
            name="gold_every",
            field=models.PositiveSmallIntegerField(
                default=10,
                help_text="Mix in an attention-check item after every k items, when the study has attention checks (0: never).",
                verbose_name="attention check after every",
            ),
        ),
        migrations.AlterField(
            model_name="study",
            name="gold_min_accuracy",
            field=models.FloatField(
                default=0.75,
                help_text="Raters below this share of attention checks right are flagged, once they have had three (0.75: three of four; 0: nobody is ever flagged).",
                verbose_name="attention checks right, at least",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="question",
            name="question_bloom_valid",
        ),
        migrations.AlterField(
            model_name="question",
            name="bloom_level",
            field=models.CharField(
                blank=True,
                choices=[
                    ("remembering", "Remembering"),
                    ("understanding", "Understanding"),
                    ("applying", "Applying"),
                    ("analyzing", "Analyzing"),
                    ("evaluating", "Evaluating"),
                    ("creating", "Creating"),
                ],
                help_text="The question's level in Bloom's revised taxonomy; none for an attention check.",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="question",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "bloom_level__in",
                        ["remembering", "understanding", "applying", "analyzing", "evaluating", "creating"],
                    ),
                    models.Q(("bloom_level", ""), ("is_gold", True)),
                    _connector="OR",
                ),
                name="question_bloom_valid",
            ),
        ),
        migrations.RunPython(inherit_better_answers, migrations.RunPython.noop),
        migrations.RunPython(expected_length_is_a_note, migrations.RunPython.noop),
    ]
