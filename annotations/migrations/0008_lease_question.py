from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_questions(apps, schema_editor):
    Lease = apps.get_model("annotations", "Lease")
    ComparisonItem = apps.get_model("annotations", "ComparisonItem")
    question = ComparisonItem.objects.filter(pk=OuterRef("item_id")).values("question_id")[:1]
    Lease.objects.update(question_id=Subquery(question))


class Migration(migrations.Migration):
    """Each lease keeps its item's question: added empty, filled from the items, then required."""

    dependencies = [
        ("annotations", "0007_rater_votes_done"),
    ]

    operations = [
        migrations.AddField(
            model_name="lease",
            name="question",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                null=True,
                on_delete=models.deletion.PROTECT,
                related_name="+",
                to="annotations.question",
            ),
        ),
        migrations.RunPython(copy_questions, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="lease",
            name="question",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                on_delete=models.deletion.PROTECT,
                related_name="+",
                to="annotations.question",
            ),
        ),
        migrations.AddIndex(
            model_name="lease",
            index=models.Index(fields=["rater", "question"], name="lease_rater_question"),
        ),
    ]
