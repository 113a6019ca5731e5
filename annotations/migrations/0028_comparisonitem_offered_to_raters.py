from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0027_vote_run_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="comparisonitem",
            name="offered_to_raters",
            field=models.BooleanField(
                default=True,
                editable=False,
                help_text="Whether human raters are handed this item (off: imported for the file's judges and LLM judges only).",
            ),
        ),
    ]
