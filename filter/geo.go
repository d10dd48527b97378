package filter

import "math"

// EarthRadius is the mean Earth radius in metres that Qdrant's haversine
// distance uses (the geo crate's MEAN_EARTH_RADIUS).
const EarthRadius = 6371008.8

// GeoPoint is a longitude and latitude in degrees.
type GeoPoint struct{ Lon, Lat float64 }

// Geo is the area of a geo condition: a circle (Center, Radius metres),
// a box (TopLeft, BottomRight) or a polygon (Exterior, Interiors: closed
// rings, first point repeated last).
type Geo struct {
	Center               GeoPoint
	Radius               float64
	TopLeft, BottomRight GeoPoint
	Exterior             []GeoPoint
	Interiors            [][]GeoPoint
}

// Haversine is the great-circle distance in metres between a and b, as
// Qdrant computes it.
func Haversine(a, b GeoPoint) float64 {
	rad := math.Pi / 180
	t1, t2 := a.Lat*rad, b.Lat*rad
	dt, dl := (b.Lat-a.Lat)*rad, (b.Lon-a.Lon)*rad
	s1, s2 := math.Sin(dt/2), math.Sin(dl/2)
	h := s1*s1 + math.Cos(t1)*math.Cos(t2)*s2*s2
	return EarthRadius * 2 * math.Asin(math.Sqrt(h))
}

// Contains reports whether p is within g read as op's shape: closer than
// Radius to Center; strictly inside the box (a box whose left edge is east
// of its right edge crosses the antimeridian); strictly inside the
// exterior ring and neither inside nor on an interior one. Boundaries are
// outside, as in Qdrant.
func (g *Geo) Contains(op Op, p GeoPoint) bool {
	switch op {
	case OpGeoRadius:
		return Haversine(g.Center, p) < g.Radius
	case OpGeoBox:
		lon := g.TopLeft.Lon < p.Lon && p.Lon < g.BottomRight.Lon
		if g.TopLeft.Lon > g.BottomRight.Lon {
			lon = p.Lon > g.TopLeft.Lon || p.Lon < g.BottomRight.Lon
		}
		return lon && g.BottomRight.Lat < p.Lat && p.Lat < g.TopLeft.Lat
	case OpGeoPolygon:
		if ringPosition(g.Exterior, p) != inside {
			return false
		}
		for _, r := range g.Interiors {
			if ringPosition(r, p) != outside {
				return false
			}
		}
		return true
	}
	return false
}

type position uint8

const (
	outside position = iota
	inside
	onBoundary
)

// ringPosition places p against a closed ring by the even-odd rule, in
// planar lon/lat coordinates as the geo crate does.
func ringPosition(ring []GeoPoint, p GeoPoint) position {
	in := false
	for i := 1; i < len(ring); i++ {
		a, b := ring[i-1], ring[i]
		if onSegment(a, b, p) {
			return onBoundary
		}
		if (a.Lat > p.Lat) != (b.Lat > p.Lat) {
			x := a.Lon + (p.Lat-a.Lat)*(b.Lon-a.Lon)/(b.Lat-a.Lat)
			if p.Lon < x {
				in = !in
			}
		}
	}
	if in {
		return inside
	}
	return outside
}

func onSegment(a, b, p GeoPoint) bool {
	cross := (b.Lon-a.Lon)*(p.Lat-a.Lat) - (b.Lat-a.Lat)*(p.Lon-a.Lon)
	if cross != 0 {
		return false
	}
	return math.Min(a.Lon, b.Lon) <= p.Lon && p.Lon <= math.Max(a.Lon, b.Lon) &&
		math.Min(a.Lat, b.Lat) <= p.Lat && p.Lat <= math.Max(a.Lat, b.Lat)
}

// geoPoint reads a payload value as a geo point: an object whose "lon"
// and "lat" are numbers (other members are ignored, as in Qdrant).
func geoPoint(v any) (GeoPoint, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return GeoPoint{}, false
	}
	lon, ok1 := asFloat(m["lon"])
	lat, ok2 := asFloat(m["lat"])
	return GeoPoint{Lon: lon, Lat: lat}, ok1 && ok2
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func (g *Geo) appendJSON(b []byte, op Op) []byte {
	point := func(b []byte, p GeoPoint) []byte {
		b = append(b, `{"lon":`...)
		b = appendFloat(b, p.Lon)
		b = append(b, `,"lat":`...)
		b = appendFloat(b, p.Lat)
		return append(b, '}')
	}
	ring := func(b []byte, r []GeoPoint) []byte {
		b = append(b, `{"points":[`...)
		for i, p := range r {
			if i > 0 {
				b = append(b, ',')
			}
			b = point(b, p)
		}
		return append(b, "]}"...)
	}
	switch op {
	case OpGeoRadius:
		b = append(b, `,"geo_radius":{"center":`...)
		b = point(b, g.Center)
		b = append(b, `,"radius":`...)
		b = appendFloat(b, g.Radius)
	case OpGeoBox:
		b = append(b, `,"geo_bounding_box":{"top_left":`...)
		b = point(b, g.TopLeft)
		b = append(b, `,"bottom_right":`...)
		b = point(b, g.BottomRight)
	default:
		b = append(b, `,"geo_polygon":{"exterior":`...)
		b = ring(b, g.Exterior)
		if len(g.Interiors) > 0 {
			b = append(b, `,"interiors":[`...)
			for i, r := range g.Interiors {
				if i > 0 {
					b = append(b, ',')
				}
				b = ring(b, r)
			}
			b = append(b, ']')
		}
	}
	return append(b, '}')
}
