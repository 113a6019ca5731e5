import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """The slot names the rater holding it, not their lease (the lease is made after the claim):
    the column here, its values from the leases in 0019, the old column gone in 0020. Each step
    is its own migration: PostgreSQL refuses to alter a table whose updated rows still wait for
    their foreign key checks in the same transaction."""

    dependencies = [
        ("annotations", "0017_refresh_stored_renders_link_protocols"),
    ]

    operations = [
        migrations.AddField(
            model_name="slot",
            name="rater",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="annotations.rater",
            ),
        ),
    ]
