// Sphere impostors: one camera-facing quad per particle, read straight from
// the simulation's storage buffers; the fragment shader intersects the view
// ray with the sphere, writes its true depth and shades it. CPU twin of the
// geometry: render/camera.rs (project) and render/tests.

struct Camera {
    view: mat4x4<f32>,
    proj: mat4x4<f32>,
    // x: colour mode (0 by body, 1 by speed), y: speed for full red (m/s), z: particle count.
    mode: vec4<f32>,
    light: vec4<f32>,
    // The domain's lower corner and, per axis, its period (0: not periodic):
    // particles are drawn wrapped into the box along periodic axes.
    box_lo: vec4<f32>,
    box_period: vec4<f32>,
}

fn wrapped(p: vec3<f32>) -> vec3<f32> {
    var out = p;
    for (var a = 0u; a < 3u; a = a + 1u) {
        let l = camera.box_period[a];
        if (l > 0.0) {
            out[a] = p[a] - l * floor((p[a] - camera.box_lo[a]) / l);
        }
    }
    return out;
}

@group(0) @binding(0) var<uniform> camera: Camera;
@group(0) @binding(1) var<storage, read> pos: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vel: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> pinfo: array<vec4<u32>>;

struct VertexOut {
    @builtin(position) clip: vec4<f32>,
    // View-space point on the quad, the sphere's view-space centre and radius.
    @location(0) point: vec3<f32>,
    @location(1) centre: vec3<f32>,
    @location(2) radius: f32,
    @location(3) colour: vec3<f32>,
}

fn hash_colour(k: u32) -> vec3<f32> {
    var h = k * 747796405u + 2891336453u;
    h = ((h >> ((h >> 28u) + 4u)) ^ h) * 277803737u;
    h = (h >> 22u) ^ h;
    let r = f32(h & 255u) / 255.0;
    let g = f32((h >> 8u) & 255u) / 255.0;
    let b = f32((h >> 16u) & 255u) / 255.0;
    return 0.35 + 0.6 * vec3<f32>(r, g, b);
}

fn particle_colour(i: u32) -> vec3<f32> {
    if (camera.mode.x > 0.5) {
        let v = vel[i].xyz;
        let t = clamp(length(v) / max(camera.mode.y, 1e-6), 0.0, 1.0);
        // Blue (at rest) through green to red (fast).
        return mix(mix(vec3<f32>(0.15, 0.3, 0.9), vec3<f32>(0.2, 0.85, 0.3), clamp(2.0 * t, 0.0, 1.0)),
                   vec3<f32>(0.95, 0.25, 0.15), clamp(2.0 * t - 1.0, 0.0, 1.0));
    }
    let body = pinfo[i].z;
    if (body == 0xffffffffu) {
        return vec3<f32>(0.82, 0.78, 0.68);
    }
    return hash_colour(body);
}

@vertex
fn vs_main(@builtin(vertex_index) vi: u32, @builtin(instance_index) ii: u32) -> VertexOut {
    let p = pos[ii];
    let centre = (camera.view * vec4<f32>(wrapped(p.xyz), 1.0)).xyz;
    let r = p.w;
    // Corners of a quad facing the camera, a little larger than the sphere
    // so its silhouette under perspective stays inside.
    // Two triangles: (0, 1, 2) and (3, 4, 5) = (-1,-1) (1,-1) (1,1) and (-1,-1) (1,1) (-1,1).
    var corner = vec2<f32>(-1.0, -1.0);
    if (vi == 1u) {
        corner = vec2<f32>(1.0, -1.0);
    } else if (vi == 2u || vi == 4u) {
        corner = vec2<f32>(1.0, 1.0);
    } else if (vi == 5u) {
        corner = vec2<f32>(-1.0, 1.0);
    }
    // Move the quad to the sphere's front so it is not clipped by what the sphere covers.
    let front = centre + normalize(-centre) * r;
    let point = front + vec3<f32>(corner * r * 1.5, 0.0);
    var out: VertexOut;
    out.clip = camera.proj * vec4<f32>(point, 1.0);
    out.point = point;
    out.centre = centre;
    out.radius = r;
    out.colour = particle_colour(ii);
    return out;
}

struct FragOut {
    @location(0) colour: vec4<f32>,
    @builtin(frag_depth) depth: f32,
}

@fragment
fn fs_main(in: VertexOut) -> FragOut {
    // Ray from the eye (origin of view space) through the quad point.
    let d = normalize(in.point);
    let b = dot(d, in.centre);
    let c = dot(in.centre, in.centre) - in.radius * in.radius;
    let disc = b * b - c;
    if (disc < 0.0) {
        discard;
    }
    let t = b - sqrt(disc);
    let hit = d * t;
    let n = normalize(hit - in.centre);
    let clip = camera.proj * vec4<f32>(hit, 1.0);
    let l = normalize(camera.light.xyz);
    let diffuse = max(dot(n, l), 0.0);
    let h = normalize(l - d);
    let spec = pow(max(dot(n, h), 0.0), 48.0) * 0.35;
    let rim = pow(1.0 - max(dot(n, -d), 0.0), 3.0) * 0.15;
    let colour = in.colour * (0.28 + 0.72 * diffuse) + vec3<f32>(spec + rim);
    var out: FragOut;
    out.colour = vec4<f32>(colour, 1.0);
    out.depth = clip.z / clip.w;
    return out;
}

// ---- the floor and the walls: flat quads, shaded by their normal -------------

struct PlaneIn {
    @location(0) position: vec3<f32>,
    @location(1) normal: vec3<f32>,
    @location(2) colour: vec3<f32>,
}

struct PlaneOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) normal: vec3<f32>,
    @location(1) colour: vec3<f32>,
    @location(2) world: vec3<f32>,
}

@vertex
fn vs_plane(in: PlaneIn) -> PlaneOut {
    var out: PlaneOut;
    out.clip = camera.proj * (camera.view * vec4<f32>(in.position, 1.0));
    out.normal = (camera.view * vec4<f32>(in.normal, 0.0)).xyz;
    out.colour = in.colour;
    out.world = in.position;
    return out;
}

@fragment
fn fs_plane(in: PlaneOut) -> @location(0) vec4<f32> {
    let l = normalize(camera.light.xyz);
    let shade = 0.45 + 0.4 * abs(dot(normalize(in.normal), l));
    // A faint 10 cm grid.
    let g = abs(fract(in.world * 10.0) - 0.5);
    let line = select(1.0, 0.85, min(g.x, g.z) < 0.02 || (min(g.x, g.y) < 0.02 && in.normal.y < 0.5));
    return vec4<f32>(in.colour * shade * line, 1.0);
}
