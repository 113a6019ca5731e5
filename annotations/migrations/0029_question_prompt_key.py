from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("annotations", "0028_comparisonitem_offered_to_raters")]

    operations = [
        migrations.AddField(
            model_name="question",
            name="prompt_key",
            field=models.CharField(blank=True, default="", max_length=120),
        ),
    ]
