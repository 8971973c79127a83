package classify_test

// The tests read times of day in named zones (America/New_York,
// Europe/Moscow ...): the zone database is embedded in the test binary so
// that they hold on a machine without one installed. The classifier itself
// uses the system's and gives no hint for a zone it cannot load.
import _ "time/tzdata"
