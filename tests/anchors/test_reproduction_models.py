"""The models inside seven reproductions (heliostat field, multibeam lines, SiC thickness, NIPT, plant community,
Maasai Mara; vegetable pricing has no model of its own) behave as their READMEs say.

Each ``tasks/<slug>/solution/solve.py`` is imported as a module and its building blocks are checked on cases
worked out by hand or synthesised here with a known answer (the full runs, their artifacts and their comparison
with the published anchors are checked by ``test_reproductions.py``). Fast: no official data is read.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import pytest

from .solutions import load

# ------------------------------------------------------------------------------------------ heliostat field

@pytest.fixture(scope="module")
def heliostat() -> ModuleType:
    return load("cumcm-2023-a-heliostat-field")


def test_sun_position_at_noon_on_the_equinox_and_the_solstice(heliostat: ModuleType) -> None:
    suns, dni, labels = heliostat.sun_vectors()
    assert len(labels) == 60 and np.allclose(np.linalg.norm(suns, axis=1), 1.0) and (dni > 0).all()
    equinox, solstice = suns[labels.index((3, 12.0))], suns[labels.index((6, 12.0))]
    assert math.degrees(math.asin(equinox[2])) == pytest.approx(90 - 39.4, abs=1e-6)   # 90° - latitude
    assert equinox[0] == pytest.approx(0.0, abs=1e-6) and equinox[1] < 0                # due south
    assert math.degrees(math.asin(solstice[2])) == pytest.approx(90 - 39.4 + 23.45, abs=0.05)
    morning, afternoon = suns[labels.index((3, 9.0))], suns[labels.index((3, 15.0))]
    assert morning[0] > 0 > afternoon[0] and morning[2] == pytest.approx(afternoon[2])   # east, then west


def test_a_tracking_mirror_reflects_the_sun_onto_the_receiver(heliostat: ModuleType) -> None:
    rng = np.random.default_rng(1)
    angle, radius = rng.uniform(0, 2 * math.pi, 50), rng.uniform(100, 350, 50)
    field = heliostat.Field(np.zeros(2), np.column_stack([radius * np.cos(angle), radius * np.sin(angle)]),
                            np.full(50, 6.0), np.full(50, 6.0), np.full(50, 4.0))
    suns, _, _ = heliostat.sun_vectors()
    for sun in suns[::7]:
        centre, normal, horizontal, other, to_rx = heliostat.mirror_frames(field, sun)
        reflected = 2 * (normal @ sun)[:, None] * normal - sun
        assert np.allclose(reflected, to_rx, atol=1e-9)
        assert np.allclose(horizontal[:, 2], 0.0) and np.allclose((horizontal * normal).sum(axis=1), 0.0)
        assert np.allclose(np.linalg.norm(other, axis=1), 1.0) and np.allclose(centre[:, 2], 4.0)


def test_rays_against_the_receiver_cylinder(heliostat: ModuleType) -> None:
    origins = np.array([[100.0, 0.0, 80.0]] * 4)
    directions = np.array([[-1.0, 0.0, 0.0],          # straight at it: hit
                           [1.0, 0.0, 0.0],           # away from it: miss
                           [-1.0, 0.0, 0.05],         # passes 5 m above the 84 m top: miss
                           [-1.0, 0.04, 0.0]])        # passes 4 m beside the 3.5 m radius: miss
    hits = heliostat.ray_hits_cylinder(origins, directions, np.zeros(2), 3.5, 76.0, 84.0)
    assert hits.tolist() == [True, False, False, False]


def test_the_sun_disc_directions_lie_inside_the_disc(heliostat: ModuleType) -> None:
    axis = np.array([[0.0, 0.6, 0.8], [0.0, 0.0, 1.0]])
    cone = heliostat.cone_directions(axis)
    assert cone.shape == (2, heliostat.CONE + 1, 3) and np.allclose(np.linalg.norm(cone, axis=2), 1.0)
    angles = np.arccos(np.clip((cone * axis[:, None, :]).sum(axis=2), -1, 1))
    assert angles[:, 0] == pytest.approx(0.0, abs=1e-7) and (angles <= heliostat.SUN_HALF_ANGLE).all()


# --------------------------------------------------------------------------------------------- multibeam

def test_the_beam_edges_reach_the_sloping_seabed() -> None:
    """Each swath edge is where the beam's 60° edge ray meets the seabed: depth there = D ± L tan(slope)."""
    multibeam = load("cumcm-2023-b-multibeam-lines")
    flat_deep, flat_shallow = multibeam.swath(100.0, 0.0)
    assert flat_deep == pytest.approx(100 * math.sqrt(3)) and flat_shallow == pytest.approx(flat_deep)
    slope = math.radians(1.5)
    deep, shallow = multibeam.swath(70.0, slope)
    assert deep / math.tan(math.radians(60)) == pytest.approx(70.0 + deep * math.tan(slope))
    assert shallow / math.tan(math.radians(60)) == pytest.approx(70.0 - shallow * math.tan(slope))
    rows = multibeam.q1()
    centre = next(r for r in rows if r["distance_m"] == 0)
    assert centre["depth_m"] == 70.0
    overlaps = [r["overlap_pct"] for r in rows if r["overlap_pct"] is not None]
    assert overlaps == sorted(overlaps, reverse=True)     # toward the shallow side the swaths narrow


# --------------------------------------------------------------------------------------------- SiC layer

@pytest.fixture(scope="module")
def sic() -> ModuleType:
    return load("cumcm-2025-b-sic-thickness")


def test_the_fit_recovers_the_thickness_of_synthetic_two_beam_fringes(sic: ModuleType) -> None:
    cauchy = sic.cauchy_for("SiC")
    nu = np.linspace(*sic.BANDS["SiC"], 1200)
    series = []
    for theta, offset in ((10.0, 0.3), (15.0, -0.5)):
        x = (nu - nu.mean()) / (nu.max() - nu.min())
        y = 30 + 4 * x + (5 - 2 * x) * np.cos(sic.phase(nu, 7.6, theta, cauchy) + offset)
        series.append((nu, y, theta))
    d, rmse = sic.fit(series, cauchy, 7.3, "two_beam")
    assert d == pytest.approx(7.6, abs=1e-4) and rmse < 1e-6
    assert sic.harmonic_ratio(nu, series[0][1], 10.0, cauchy, d) < 0.01     # a pure cosine: no second harmonic


def test_airy_fringes_show_a_second_harmonic(sic: ModuleType) -> None:
    cauchy = sic.cauchy_for("SiC")
    nu = np.linspace(*sic.BANDS["SiC"], 1200)
    y = 40 + 20 * sic.fringe_shape(sic.phase(nu, 7.6, 10.0, cauchy), "airy", 0.5)
    assert sic.harmonic_ratio(nu, y, 10.0, cauchy, 7.6) > sic.MULTI_BEAM_RATIO


def test_the_autocorrelation_period_of_a_cosine(sic: ModuleType) -> None:
    step = 0.5
    grid = np.arange(0, 1000, step)
    assert sic.autocorrelation_period(np.cos(2 * math.pi * grid / 37.3), step) == pytest.approx(37.3, rel=2e-3)


# -------------------------------------------------------------------------------------------------- NIPT

def test_gestational_weeks_and_the_expected_risk_of_a_test_week() -> None:
    nipt = load("cumcm-2025-c-nipt")
    assert nipt.weeks("11w+6") == pytest.approx(11 + 6 / 7) and nipt.weeks("13W") == 13.0
    assert math.isnan(nipt.weeks("unknown"))
    assert [nipt.risk_class(w) for w in (12, 13, 27, 28)] == [1.0, 2.0, 2.0, 3.0]
    always = dict.fromkeys(range(10, 26), 1.0)
    assert nipt.expected_risk(10, always) == 1.0 and nipt.expected_risk(14, always) == 2.0
    never = dict.fromkeys(range(10, 26), 0.0)
    assert nipt.expected_risk(10, never) == 3.0                        # never qualifies: very high risk
    half = dict.fromkeys(range(10, 26), 0.5)                           # 10: 1/2 low, 12: 1/4 low, then high
    assert nipt.expected_risk(10, half) == pytest.approx(0.5 + 0.25 + 2 * (0.25 - 0.5 ** 8) + 3 * 0.5 ** 8)


# ------------------------------------------------------------------------------------------ plant community

def test_one_species_without_drought_settles_at_its_capacity_net_of_losses() -> None:
    plant = load("mcm-2023-a-plant-community")
    path = plant.simulate(1, set())
    monthly_growth = plant.GROWTH[0] / plant.STEPS_PER_YEAR
    equilibrium = plant.CAPACITY * plant.CAPACITY_SHARE[0] * (1 - plant.BETA_BASE / monthly_growth)
    assert path[-1, 0] == pytest.approx(equilibrium, rel=1e-3)
    dry = plant.simulate(1, set(range(0, plant.YEARS, 2)))
    assert dry[1:, 0].mean() < path[1:, 0].mean()                      # droughts cost the intolerant species
    assert plant.pielou(np.full(5, 3.0)) == pytest.approx(1.0)
    assert plant.pielou(np.array([1000.0, 1e-9, 1e-9])) < 0.01


# ---------------------------------------------------------------------------------------------- Maasai Mara

def test_land_use_plans_meet_their_scenario_and_distances_count_grid_steps() -> None:
    maasai = load("mcm-2023-b-maasai-mara")
    assert len(maasai.neighbours()) == 2 * maasai.SIZE * (maasai.SIZE - 1)
    uses = ["wildlife_sanctuary"] * maasai.SIZE ** 2
    uses[0] = "tourism_area"                                        # north-west corner: distance = row + column
    assert maasai.interaction_distance(uses) == pytest.approx(180 / 35)
    uses[1] = "agricultural_area"                                   # crossing farmland costs 2 steps
    assert maasai.interaction_distance(uses) > 179 / 34
    for limits in maasai.SCENARIOS.values():
        plan, value, conflict = maasai.plan(limits["wildlife_min"], limits["agriculture_min"], limits["agriculture_max"])
        assert len(plan) == maasai.SIZE ** 2 and set(plan) <= set(maasai.USES)
        assert plan.count("wildlife_sanctuary") >= limits["wildlife_min"]
        assert limits["agriculture_min"] <= plan.count("agricultural_area") <= limits["agriculture_max"]
        assert value > 0 and conflict >= 0
