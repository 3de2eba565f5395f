"""The public schema of UCI Heart Disease's 13 features, from public clinical constants only.

:data:`HEART_SCHEMA` is written from the UCI documentation of the codes, AHA blood-pressure
categories, NCEP ATP III cholesterol categories and the 220 − age rule for the maximum heart rate;
nothing in it is computed from the files :mod:`~pubsubml.data.heart_disease` reads, so building
it reads no data.
"""

from __future__ import annotations

from pubsubml.schema import Feature, FeatureSchema

__all__ = ["HEART_SCHEMA"]


def _numeric(name: str, lower: float, upper: float, default: float, description: str) -> Feature:
    return Feature(name=name, lower=lower, upper=upper, default=default, description=description)


def _categorical(name: str, codes: tuple[int, ...], default: int, doc: str) -> Feature:
    return Feature(
        name=name, kind="categorical", categories=codes, default=default, description=doc
    )


# Sources of the bounds and defaults (public constants, none read from the files):
# * codes of the categorical features: the UCI documentation of the data set (heart-disease.names);
# * trestbps: American Heart Association blood-pressure categories (normal systolic < 120 mm Hg,
#   hypertensive crisis > 180 mm Hg); 60 mm Hg systolic is circulatory shock, 240 far beyond a
#   crisis;
# * chol: NCEP ATP III total-cholesterol categories (desirable < 200 mg/dl, high >= 240 mg/dl);
#   familial hypercholesterolaemia reaches 350–550 mg/dl (heterozygous) and more (homozygous);
# * thalach: predicted maximum heart rate 220 − age (Fox & Haskell), at most 220 at any age; 40
#   beats per minute is the resting rate of a trained athlete;
# * oldpeak: exercise-ECG criteria (AHA/ACC exercise-testing guideline): ST depression of 1 mm
#   (0.1 mV) or more is abnormal, 0 is the normal response; negative values are ST elevation;
# * fbs: the American Diabetes Association's fasting threshold for diabetes is 126 mg/dl, so most
#   adults have a fasting blood sugar at or below 120 mg/dl;
# * sex: men are the majority of the patients referred for coronary angiography (e.g. the ACC
#   NCDR CathPCI Registry reports).
HEART_SCHEMA = FeatureSchema(
    features=(
        _numeric("age", 18, 100, 50, "age in years (adults); default a middle adult age"),
        _categorical("sex", (0, 1), 1, "1 = male, 0 = female"),
        _categorical(
            "cp",
            (1, 2, 3, 4),
            4,
            "chest pain: 1 typical angina, 2 atypical angina, 3 non-anginal, 4 asymptomatic",
        ),
        _numeric(
            "trestbps",
            60,
            240,
            120,
            "resting systolic blood pressure, mm Hg; default the AHA upper limit of normal",
        ),
        _numeric(
            "chol",
            50,
            700,
            200,
            "serum total cholesterol, mg/dl; default the NCEP ATP III desirable limit",
        ),
        _categorical("fbs", (0, 1), 0, "fasting blood sugar > 120 mg/dl: 1 true, 0 false"),
        _categorical(
            "restecg",
            (0, 1, 2),
            0,
            "resting ECG: 0 normal, 1 ST-T wave abnormality, 2 left ventricular hypertrophy",
        ),
        _numeric(
            "thalach",
            40,
            220,
            170,
            "maximum heart rate achieved, beats/min; default 220 − 50 (predicted at age 50)",
        ),
        _categorical("exang", (0, 1), 0, "exercise-induced angina: 1 yes, 0 no"),
        _numeric(
            "oldpeak",
            -5,
            10,
            0,
            "exercise-induced ST depression, mm (negative: elevation); default 0, normal",
        ),
        _categorical(
            "slope",
            (1, 2, 3),
            1,
            "slope of the peak exercise ST segment: 1 upsloping (normal), 2 flat, 3 downsloping",
        ),
        _categorical("ca", (0, 1, 2, 3), 0, "major vessels (0–3) coloured by fluoroscopy"),
        _categorical("thal", (3, 6, 7), 3, "thallium test: 3 normal, 6 fixed, 7 reversible defect"),
    )
)
"""The public schema of the 13 features (bounds and defaults from public clinical constants)."""
